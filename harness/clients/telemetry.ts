// A telemetry consumer as a real client would write it (document 1 part 4 "Observation endpoints"):
// poll GET /v1/telemetry?after=<sequence> (optionally gzip), or read GET /v1/telemetry/stream and split
// the concatenated batches by their headers (never by HTTP chunks). Decoding is the oracle's.

import { gunzipSync } from 'node:zlib';
import { request } from 'undici';
import { asTransportError, HarnessError } from '../errors.ts';
import { checkReply, type CheckedReply } from '../oracle/reply.ts';
import { BatchSplitter, checkBatchCursor, decodeBatch, decodeBatchHeader, decodeBatchYielding, decodeBatchSequences, type DecodeOptions, type CycleCaptureRecordV2, type TelemetryBatch, type TelemetryBatchHeaderV1 } from '../oracle/telemetry.ts';
import { contentType, type ControlClient, type RawReply } from './control.ts';
import { pollPause } from './poll.ts';

export interface TelemetryPoll {
  raw: RawReply;
  /** The decoded batch on 200 (gunzipped first when the reply says Content-Encoding gzip). */
  batch?: TelemetryBatch;
  /** The strictly checked JSON refusal otherwise. */
  refusal?: CheckedReply;
  /** The batch bytes as received after any content decoding. */
  bytes?: Uint8Array;
  /** Said of a refusal that was telemetry_busy every time it was asked (empty otherwise). */
  note?: string;
}

/**
 * telemetry_busy (document 1 part 7): "ring header torn after 16 samples; response carries Retry-After 1;
 * retry same cursor". A reader that only wants the records does what the document tells a client to do:
 * waits the Retry-After it was given and asks for the same cursor again, up to BUSY_TRIES answers in all. A
 * correct cell answers it whenever a reader meets the writer inside a record sixteen times running, which
 * a loaded host does now and then; the suites that test telemetry_busy itself poll with `busy: 'answer'`.
 */
export const BUSY_TRIES = 5;

/** Is this reply telemetry_busy (409 and that leading label)? */
function isBusy(raw: RawReply): boolean {
  return raw.status === 409 && checkReply(raw.status, contentType(raw), raw.body, 'telemetry').label === 'telemetry_busy';
}

/**
 * When a record's cycle was due: its t_ns less its lateness (cycle_jitter_ns, "wake minus scheduled",
 * document 1 part 2); a cycle that woke early counts at its wake. A plan whose time counts from the cycle
 * grid starts at the due time of the cycle before it, up to that cycle's lateness before its wake.
 */
export function dueNs(r: Pick<CycleCaptureRecordV2, 't_ns' | 'cycle_jitter_ns'>): bigint {
  return r.cycle_jitter_ns > 0n ? r.t_ns - r.cycle_jitter_ns : r.t_ns;
}

/** The wait a telemetry_busy reply asks for: its Retry-After in seconds (1 when absent or not a number of 1..5). */
export function busyWaitMs(raw: RawReply): number {
  const v = raw.headers['retry-after'];
  const n = Number(Array.isArray(v) ? v[0] : v);
  return Number.isInteger(n) && n >= 1 && n <= 5 ? n * 1000 : 1000;
}

/**
 * One poll, asked again on telemetry_busy (BUSY_TRIES answers at most); any other answer is returned as it
 * came. `note`: what to add to a refusal that was telemetry_busy every time.
 */
async function pollThroughBusy<T extends { raw: RawReply }>(poll: () => Promise<T>): Promise<T & { note: string }> {
  for (let tries = 1; ; tries++) {
    const p = await poll();
    if (!isBusy(p.raw)) return { ...p, note: '' };
    if (tries >= BUSY_TRIES) return { ...p, note: ` (telemetry_busy ${tries} times running, asked again after each Retry-After)` };
    await pollPause(busyWaitMs(p.raw));
  }
}

/**
 * One poll, as a client the document describes makes it: telemetry_busy is asked again (pollThroughBusy)
 * unless `busy: 'answer'` wants the first answer as it came (the suites that test telemetry_busy itself).
 * `after` is put into the query as given (a bigint, or raw query text for malformed cursors).
 */
export async function pollTelemetry(
  client: ControlClient,
  after: bigint | string | undefined,
  opts: { gzip?: boolean; acceptEncoding?: string; path?: string; decode?: DecodeOptions; busy?: 'answer' } = {},
): Promise<TelemetryPoll> {
  return opts.busy === 'answer' ? pollOnce(client, after, opts) : pollThroughBusy(() => pollOnce(client, after, opts));
}

async function pollOnce(client: ControlClient, after: bigint | string | undefined, opts: { gzip?: boolean; acceptEncoding?: string; path?: string; decode?: DecodeOptions }): Promise<TelemetryPoll> {
  const path = opts.path ?? '/v1/telemetry';
  const query = after === undefined ? '' : typeof after === 'bigint' ? `?after=${after}` : `?${after}`;
  const headers: Record<string, string> = {};
  const ae = opts.acceptEncoding ?? (opts.gzip ? 'gzip' : undefined);
  if (ae !== undefined) headers['accept-encoding'] = ae;
  const raw = await client.raw('GET', path + query, undefined, headers);
  if (raw.status !== 200) return { raw, refusal: checkReply(raw.status, contentType(raw), raw.body, 'telemetry') };
  const bytes = raw.headers['content-encoding'] === 'gzip' ? new Uint8Array(gunzipSync(raw.body)) : raw.body;
  // In turns: a full batch decoded in one piece stalls the harness's timers (oracle decodeBatchYielding).
  return { raw, bytes, batch: await decodeBatchYielding(bytes, opts.decode) };
}

/** Poll and insist on a batch (telemetry_busy asked again, as the document says). */
export async function readBatch(client: ControlClient, after: bigint, opts: { gzip?: boolean } = {}): Promise<TelemetryBatch> {
  const p = await pollTelemetry(client, after, opts);
  if (!p.batch) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `telemetry poll after=${after} refused: ${p.raw.status} ${p.refusal?.reply.error}${p.note ?? ''}`, { detail: { status: p.raw.status } });
  checkBatchCursor(p.batch.header, after);
  return p.batch;
}

/** One plain poll's bytes; a refusal is the target's (HIL_ERR_TARGET_REFUSED with its reply). */
async function batchBytes(client: ControlClient, after: bigint): Promise<Uint8Array> {
  const { raw, note } = await pollThroughBusy(async () => ({ raw: await client.raw('GET', `/v1/telemetry?after=${after}`) }));
  if (raw.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `telemetry poll after=${after} refused: ${raw.status} ${Buffer.from(raw.body).toString('utf8')}${note}`, { detail: { status: raw.status } });
  return raw.body;
}

/** Poll and insist on a batch, decoding only each record's sequence (oracle decodeBatchSequences). */
export async function readSequences(client: ControlClient, after: bigint): Promise<{ header: TelemetryBatchHeaderV1; seqs: bigint[] }> {
  const b = decodeBatchSequences(await batchBytes(client, after));
  checkBatchCursor(b.header, after);
  return b;
}

/** Every record after `after`, batch by batch until a batch is not full (4096 records). */
export async function recordsSince(client: ControlClient, after: bigint): Promise<CycleCaptureRecordV2[]> {
  const out: CycleCaptureRecordV2[] = [];
  for (let cursor = after; ; ) {
    const b = await readBatch(client, cursor);
    out.push(...b.records);
    cursor = b.header.last_sequence;
    if (b.header.record_count < 4096) return out;
  }
}

/** Poll and check only the header (cheap: no record is decoded). */
export async function readHeader(client: ControlClient, after: bigint): Promise<{ header: TelemetryBatchHeaderV1; length: number }> {
  const bytes = await batchBytes(client, after);
  const header = decodeBatchHeader(bytes);
  checkBatchCursor(header, after);
  return { header, length: bytes.length };
}

/**
 * The newest sequence the target had at the time of the call (last_sequence of a poll that is not full).
 * Reading the whole ring from `from` costs up to 22 MB per poll and stalls a small target for a while, so
 * the walk starts from a hint when one is at hand: Status `core.cycle` (one capture record per cycle on
 * the reference stack). A hint is only a starting cursor: one that turns out to be ahead of the ring
 * falls back to `from`, so a target that numbers its records otherwise is still read correctly.
 */
export async function latestSequence(client: ControlClient, from = 0n): Promise<bigint> {
  let after = from;
  const st = await client.status();
  const cycle = (st.reply.data as { core?: { cycle?: unknown } } | undefined)?.core?.cycle;
  if (typeof cycle === 'bigint' && cycle > from + 64n) after = cycle - 64n;
  for (;;) {
    const cursor = after;
    const { raw, note } = await pollThroughBusy(async () => ({ raw: await client.raw('GET', `/v1/telemetry?after=${cursor}`) }));
    if (raw.status === 409 && after !== from && !isBusy(raw)) {
      after = from; // the hint was ahead of the ring: walk from the start
      continue;
    }
    if (raw.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `telemetry poll after=${after} refused: ${raw.status} ${Buffer.from(raw.body).toString('utf8')}${note}`);
    const header = decodeBatchHeader(raw.body);
    checkBatchCursor(header, after);
    if (header.record_count < 4096) return header.last_sequence;
    after = header.last_sequence;
  }
}

export interface StreamCapture {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Complete batches in arrival order, with the local time each completed (ms, performance.now()). */
  batches: Array<{ batch: TelemetryBatch; at: number }>;
  /** True when the server ended the body (as opposed to our abort). */
  ended: boolean;
  /** The JSON refusal when the stream was refused. */
  refusal?: CheckedReply;
}

/**
 * Read GET /v1/telemetry/stream?after=<after> for up to `ms` (or until the server ends it, or until
 * `until` says so), splitting batches by header. Every batch is decoded by the oracle: as it arrives, or,
 * with `decodeAfter`, once the read has ended (while reading, `until` sees each batch's checked header and
 * no records). A read that times arrivals wants the latter: a 250 us cycle streams 4000 records a second,
 * and decoding them as they came took about half of the harness's thread, so that the arrival times
 * measured the harness's own decoding.
 */
export async function readStream(
  client: ControlClient,
  after: bigint,
  ms: number,
  opts: { onBatch?: (b: TelemetryBatch) => void; until?: (batches: StreamCapture['batches']) => boolean; decodeAfter?: boolean } = {},
): Promise<StreamCapture> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  const res = await request(`http://localhost/v1/telemetry/stream?after=${after}`, { method: 'GET', dispatcher: client.agent, signal: ac.signal });
  const out: StreamCapture = { status: res.statusCode, headers: res.headers, batches: [], ended: false };
  if (res.statusCode !== 200) {
    clearTimeout(timer);
    const body = new Uint8Array(await res.body.arrayBuffer());
    out.refusal = checkReply(res.statusCode, contentType({ status: res.statusCode, headers: res.headers, body }), body, 'telemetry');
    return out;
  }
  const splitter = new BatchSplitter();
  const later: Uint8Array[] = [];
  try {
    for await (const chunk of res.body) {
      for (const bytes of splitter.push(chunk as Uint8Array)) {
        const at = performance.now();
        if (opts.decodeAfter) {
          // The splitter has checked the header already; its records wait for the end of the read.
          later.push(bytes);
          out.batches.push({ batch: { header: decodeBatchHeader(bytes), records: [] }, at });
        } else {
          const batch = decodeBatch(bytes);
          out.batches.push({ batch, at });
          opts.onBatch?.(batch);
        }
        if (opts.until?.(out.batches)) ac.abort();
      }
    }
    out.ended = true;
    splitter.finish();
  } catch (e) {
    if (!ac.signal.aborted) throw asTransportError(e, 'GET /v1/telemetry/stream');
  } finally {
    clearTimeout(timer);
  }
  for (let i = 0; i < later.length; i++) {
    const batch = decodeBatch(later[i]!);
    out.batches[i]!.batch = batch;
    opts.onBatch?.(batch);
  }
  return out;
}
