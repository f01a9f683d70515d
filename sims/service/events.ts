// The event log (document 1 part 6): a ring of the last 256 events, sequences increasing by one within an
// adapter incarnation, a synthetic events_dropped record for cursors older than the ring.

import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { refuse } from './envelope.ts';
import { encodeJson } from '../json.ts';
import { CursorError, parseAfterCursor } from '../primitives.ts';

export const EVENT_RING = 256;
export const EVENTS_PER_POLL = 64;
/** Comment line interval on an idle event stream (docs/profile.md "Events"). */
export const EVENT_KEEPALIVE_MS = 15_000;
/** A stream whose client lets this much output queue up is closed; the client resumes with after. */
export const EVENT_STREAM_QUEUE_BOUND = 4 * 1024 * 1024;
/** The reason a synthetic events_dropped record carries (document 1 part 6 "Reason event_cursor_lost"). */
export const EVENT_CURSOR_LOST = 'event_cursor_lost';

export interface EventRecord {
  sequence: bigint;
  time_ns: bigint;
  type: string;
  daemon_incarnation: string;
  adapter_incarnation: string;
  [payload: string]: unknown;
}

/** Payload field name per event type (document 1 part 6 table). */
export const EVENT_PAYLOAD: Record<string, string> = {
  grant_acquired: 'grant',
  grant_renewed: 'grant',
  grant_released: 'grant',
  grant_expired: 'grant',
  grant_revoked: 'grant',
  enable_changed: 'enable',
  arm_changed: 'enable',
  handle_transition: 'handle',
  execution_started: 'execution',
  execution_completed: 'execution',
  execution_aborted: 'execution',
  execution_faulted: 'execution',
  jog_begin: 'jog',
  jog_end: 'jog',
  jog_expired: 'jog',
  jog_ramping: 'jog',
  jog_limited: 'jog',
  fault_latched: 'fault',
  fault_cleared: 'fault',
  home_epoch_changed: 'epoch',
  daemon_incarnation_changed: 'incarnation',
  adapter_incarnation_changed: 'incarnation',
  publisher_overflow: 'overflow',
  events_dropped: 'events_dropped',
  telemetry_mark: 'mark',
};

export class EventLog extends EventEmitter {
  private ring: EventRecord[] = [];
  private latest = 0n;

  constructor(
    readonly adapterIncarnation: string,
    private daemonIncarnation: () => string,
    private readonly clock: () => bigint,
  ) {
    super();
    this.setMaxListeners(0); // one listener per open event stream
  }

  get latestSequence(): bigint {
    return this.latest;
  }

  private lastTime = 0n;
  private stamp: bigint | undefined;

  /**
   * Run `fn` with every event it publishes stamped `timeNs`: an event the core raised, and what the
   * service publishes because of it (an execution event for a native_execution), carry the core's
   * publication time.
   */
  at<T>(timeNs: bigint | undefined, fn: () => T): T {
    const outer = this.stamp;
    this.stamp = timeNs;
    try {
      return fn();
    } finally {
      this.stamp = outer;
    }
  }

  publish(type: string, payload: unknown): EventRecord {
    const field = EVENT_PAYLOAD[type];
    if (!field) throw new Error(`unknown event type ${type}`);
    // Never earlier than the event before it: a core event relayed a fraction of a cycle after an event
    // the service stamped from the host clock keeps the log's times in sequence order (docs/profile.md).
    const t = this.stamp ?? this.clock();
    if (t > this.lastTime) this.lastTime = t;
    const rec: EventRecord = {
      sequence: ++this.latest,
      time_ns: this.lastTime,
      type,
      daemon_incarnation: this.daemonIncarnation(),
      adapter_incarnation: this.adapterIncarnation,
      [field]: payload,
    };
    this.ring.push(rec);
    if (this.ring.length > EVENT_RING) this.ring.shift();
    this.emit('event', rec);
    return rec;
  }

  /** Parse the `after` query value: one unsigned decimal number (absent means 0). */
  static cursor(query: URLSearchParams): bigint {
    // "One unsigned decimal number" (part 6): absent means 0; empty or repeated is not one number.
    try {
      return parseAfterCursor(query);
    } catch (e) {
      if (e instanceof CursorError) throw refuse('invalid_event_cursor', e.message);
      throw e;
    }
  }

  /** Events after `after`, at most `limit`, with a synthetic events_dropped first when history was lost. */
  read(after: bigint, limit = EVENTS_PER_POLL): EventRecord[] {
    if (after > this.latest) throw refuse('event_cursor_ahead', `after ${after} is newer than ${this.latest}`);
    const oldest = this.ring.length ? this.ring[0]!.sequence : this.latest + 1n;
    const out: EventRecord[] = [];
    let from = after + 1n;
    if (after !== 0n && from < oldest) {
      out.push({
        sequence: oldest - 1n,
        time_ns: this.lastTime > this.clock() ? this.lastTime : this.clock(),
        type: 'events_dropped',
        daemon_incarnation: this.daemonIncarnation(),
        adapter_incarnation: this.adapterIncarnation,
        events_dropped: { first_lost_sequence: from, last_lost_sequence: oldest - 1n, reason: EVENT_CURSOR_LOST },
      });
      from = oldest;
    }
    for (const e of this.ring) {
      if (out.length >= limit) break;
      if (e.sequence >= from) out.push(e);
    }
    return out;
  }
}

/** One Server-Sent Events message: id (sequence), event (type), data (the Event as exact JSON, no envelope). */
export function sseMessage(e: EventRecord): string {
  return `id: ${e.sequence}\nevent: ${e.type}\ndata: ${encodeJson(e)}\n\n`;
}

/**
 * GET /v1/events/stream?after=<sequence> (document 1 part 6). The cursor is checked exactly as the poll
 * checks it, and a refusal is thrown before any byte of the stream (the caller answers the JSON 409).
 * Then the backlog after the cursor (with the synthetic events_dropped first when history was lost) and
 * every event published while the client stays connected. Last-Event-ID is not read.
 */
export function streamEvents(log: EventLog, req: IncomingMessage, res: ServerResponse, url: URL, watching?: (open: boolean) => void): void {
  const after = EventLog.cursor(url.searchParams);
  const backlog = log.read(after, Number.MAX_SAFE_INTEGER);
  req.resume();
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
  res.flushHeaders();
  let done = false;
  const write = (text: string) => {
    if (done) return;
    res.write(text);
    if (res.writableLength > EVENT_STREAM_QUEUE_BOUND) finish();
  };
  const onEvent = (e: EventRecord) => write(sseMessage(e));
  const keepalive = setInterval(() => write(': keepalive\n'), EVENT_KEEPALIVE_MS);
  keepalive.unref();
  const cleanup = () => {
    if (done) return;
    done = true;
    clearInterval(keepalive);
    log.off('event', onEvent);
    watching?.(false);
  };
  const finish = () => {
    cleanup();
    if (!res.writableEnded && !res.destroyed) res.end();
  };
  res.on('close', cleanup);
  res.on('error', cleanup);
  // Subscribe in the same synchronous step as the backlog read: no event can fall between the two.
  log.on('event', onEvent);
  // A client watching over wall time (a replay paces the core while it does: DecisionLog 'watch').
  watching?.(true);
  for (const e of backlog) write(sseMessage(e));
}
