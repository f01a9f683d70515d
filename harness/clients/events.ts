// Event log client (document 1 part 6): poll GET /v1/events?after=<sequence>, or read
// GET /v1/events/stream?after=<sequence> (Server-Sent Events) with a small strict line parser.

import { request } from 'undici';
import { asTransportError, HarnessError } from '../errors.ts';
import { isJsonObject, parseExact, type JsonExact } from '../oracle/json.ts';
import { checkReply, type CheckedReply } from '../oracle/reply.ts';
import { contentType, type ControlClient } from './control.ts';
import { pollPause } from './poll.ts';

export interface CellEvent {
  sequence: bigint;
  time_ns: bigint;
  type: string;
  daemon_incarnation: string;
  adapter_incarnation: string;
  [payload: string]: JsonExact | undefined;
}

export interface EventBatch {
  events: CellEvent[];
  next_sequence: bigint;
  latest_sequence: bigint;
}

/**
 * An EventBatch as the client reads it. Document 1 part 6 names next_sequence and latest_sequence but not
 * the events array ("Name of the events array field: not shown"): it is `events` (docs/profile.md
 * "Events"), or else the batch's one array-valued field, whatever its name.
 */
export function eventBatchOf(d: unknown): EventBatch {
  if (!isJsonObject(d)) throw new HarnessError('HIL_ERR_TARGET_MALFORMED', 'EventBatch is not a JSON object');
  const arrays = Array.isArray(d.events) ? ['events'] : Object.keys(d).filter((k) => Array.isArray(d[k]));
  if (arrays.length !== 1) throw new HarnessError('HIL_ERR_TARGET_MALFORMED', `EventBatch without one events array (array fields: ${arrays.join(', ') || 'none'})`);
  return { ...(d as unknown as EventBatch), events: d[arrays[0]!] as unknown as CellEvent[] };
}

/** One poll; throws when the service refuses (callers asserting refusals use client.get directly). */
export async function pollEvents(client: ControlClient, after: bigint): Promise<EventBatch> {
  const r = await client.get(`/v1/events?after=${after}`, 'subscribe_events');
  if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `events poll refused: ${r.status} ${r.reply.error}`, { detail: { status: r.status, label: r.label } });
  return eventBatchOf(r.reply.data);
}

/** The newest sequence now (a cursor for "events from here on"). */
export async function eventCursor(client: ControlClient): Promise<bigint> {
  return (await pollEvents(client, 0n)).latest_sequence;
}

/** Poll until an event matching `pred` appears after `after` or the deadline passes. */
export async function waitForEvent(
  client: ControlClient,
  after: bigint,
  pred: (e: CellEvent) => boolean,
  timeoutMs = 3_000,
): Promise<CellEvent | undefined> {
  const until = Date.now() + timeoutMs;
  let cursor = after;
  for (;;) {
    const b = await pollEvents(client, cursor);
    const hit = b.events.find(pred);
    if (hit) return hit;
    if (b.events.length) cursor = b.next_sequence;
    if (Date.now() > until) return undefined;
    await pollPause(20);
  }
}

/** All events after `after` (following next_sequence until caught up). */
export async function eventsSince(client: ControlClient, after: bigint): Promise<CellEvent[]> {
  const out: CellEvent[] = [];
  let cursor = after;
  for (let i = 0; i < 64; i++) {
    const b = await pollEvents(client, cursor);
    out.push(...b.events);
    if (!b.events.length || b.next_sequence >= b.latest_sequence) break;
    cursor = b.next_sequence;
  }
  return out;
}

// ---- Server-Sent Events ----

/** One dispatched SSE message, as the text fields the stream carried. */
export interface SseMessage {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/**
 * A strict SSE parser (the event-stream grammar of the HTML standard, narrowed to what document 1 part 6
 * sends). Input is UTF-8 (decoded fatally, a leading BOM skipped); lines end in CRLF, LF or CR; a line
 * starting with ':' is a comment; `field: value` drops one space after the colon; a blank line dispatches.
 * Strict: a field other than id, event and data, a repeated id or event within one message, an id
 * containing NUL, or a message with no data line is an error rather than silently ignored.
 */
export class SseParser {
  private readonly decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  private text = '';
  private pendingCr = false;
  private started = false;
  private id: string | undefined;
  private event: string | undefined;
  private data: string[] = [];
  private fieldsSeen = 0;
  comments: string[] = [];

  /** Feed bytes; returns the messages completed by them. */
  push(chunk: Uint8Array): SseMessage[] {
    return this.lines(this.decoder.decode(chunk, { stream: true }));
  }

  /** End of stream: a message without its terminating blank line is discarded (per the standard), bytes must be whole. */
  finish(): { discarded: boolean } {
    this.lines(this.decoder.decode());
    const discarded = this.fieldsSeen > 0 || this.text.length > 0;
    return { discarded };
  }

  private lines(input: string): SseMessage[] {
    if (!this.started && input.length) {
      this.started = true;
      if (input.charCodeAt(0) === 0xfeff) input = input.slice(1);
    }
    const out: SseMessage[] = [];
    let s = this.text + input;
    let i = 0;
    if (this.pendingCr && s.startsWith('\n')) i = 1; // the LF of a CRLF split across chunks
    this.pendingCr = false;
    for (;;) {
      let j = i;
      while (j < s.length && s[j] !== '\n' && s[j] !== '\r') j++;
      if (j >= s.length) break;
      const line = s.slice(i, j);
      if (s[j] === '\r') {
        if (j + 1 < s.length) i = s[j + 1] === '\n' ? j + 2 : j + 1;
        else {
          i = j + 1;
          this.pendingCr = true;
        }
      } else i = j + 1;
      const m = this.line(line);
      if (m) out.push(m);
    }
    this.text = s.slice(i);
    s = '';
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === '') {
      if (this.fieldsSeen === 0) return undefined;
      if (this.data.length === 0) throw new HarnessError('HIL_ERR_TARGET_MALFORMED', 'SSE message without a data line');
      const m: SseMessage = { id: this.id, event: this.event, data: this.data.join('\n') };
      this.id = undefined;
      this.event = undefined;
      this.data = [];
      this.fieldsSeen = 0;
      return m;
    }
    if (line.startsWith(':')) {
      this.comments.push(line.slice(1).replace(/^ /, ''));
      return undefined;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    this.fieldsSeen++;
    switch (field) {
      case 'id':
        if (this.id !== undefined) throw new HarnessError('HIL_ERR_TARGET_MALFORMED', 'SSE message with two id lines');
        if (value.includes('\0')) throw new HarnessError('HIL_ERR_TARGET_MALFORMED', 'SSE id contains NUL');
        this.id = value;
        return undefined;
      case 'event':
        if (this.event !== undefined) throw new HarnessError('HIL_ERR_TARGET_MALFORMED', 'SSE message with two event lines');
        this.event = value;
        return undefined;
      case 'data':
        this.data.push(value);
        return undefined;
      default:
        throw new HarnessError('HIL_ERR_TARGET_MALFORMED', `SSE field ${JSON.stringify(field)} is not one the event stream sends`);
    }
  }
}

export interface EventStreamMessage extends SseMessage {
  /** data parsed as exact JSON (bigint integers). */
  parsed: JsonExact;
  at: number;
}

export interface EventStreamCapture {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  messages: EventStreamMessage[];
  comments: string[];
  /** True when the server ended the body (as opposed to our abort). */
  ended: boolean;
  /** The JSON refusal when the stream was refused. */
  refusal?: CheckedReply;
}

/**
 * Read GET /v1/events/stream for up to `ms` (or until `until` returns true for a message). `after`
 * undefined omits the query; a string is sent verbatim (for refusal tests).
 */
export async function readEventStream(
  client: ControlClient,
  after: bigint | string | undefined,
  ms: number,
  opts: { headers?: Record<string, string>; until?: (m: EventStreamMessage) => boolean; onOpen?: () => void } = {},
): Promise<EventStreamCapture> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  const query = after === undefined ? '' : `?after=${after}`;
  try {
    const res = await request(`http://localhost/v1/events/stream${query}`, {
      method: 'GET',
      dispatcher: client.agent,
      signal: ac.signal,
      headers: opts.headers ?? {},
    });
    const out: EventStreamCapture = { status: res.statusCode, headers: res.headers, messages: [], comments: [], ended: false };
    if (res.statusCode !== 200) {
      const body = new Uint8Array(await res.body.arrayBuffer());
      out.refusal = checkReply(res.statusCode, contentType({ status: res.statusCode, headers: res.headers, body }), body);
      return out;
    }
    opts.onOpen?.();
    const parser = new SseParser();
    out.comments = parser.comments;
    try {
      for await (const chunk of res.body) {
        for (const m of parser.push(chunk as Uint8Array)) {
          const msg: EventStreamMessage = { ...m, parsed: parseExact(m.data), at: performance.now() };
          out.messages.push(msg);
          if (opts.until?.(msg)) {
            ac.abort();
            return out;
          }
        }
      }
      out.ended = true;
      parser.finish();
    } catch (e) {
      if (!ac.signal.aborted) throw asTransportError(e, 'GET /v1/events/stream');
    }
    return out;
  } finally {
    clearTimeout(timer);
  }
}
