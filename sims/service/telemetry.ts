// Telemetry endpoints of the control service (document 1 part 2 "Telemetry binary records", part 4
// "Observation endpoints", part 7 "Telemetry and events", part 8 limits):
//
//   GET /v1/telemetry?after=<sequence>         one TelemetryBatchHeaderV1 + records, gzip on request
//   GET /v1/telemetry/stream?after=<sequence>  concatenated batches over chunked HTTP, one per write
//
// Batches come from the current core incarnation's capture ring (sims/core/capture/reader.ts CaptureReader).
// Every telemetry error is a JSON Response envelope with HTTP 409 and operation `telemetry`; the service
// writes it through the `refuse` callback it hands us.
//
// Profile decisions (docs/profile.md "Telemetry endpoints"):
// - `after` absent is 0; otherwise exactly one `after` parameter holding a canonical unsigned decimal
//   (`0` or no leading zero, at most uint64). `after=`, `after=01`, `after=-1`, `after=+1`, `after=abc`,
//   `after=1&after=2` and values above 2^64-1 are invalid_telemetry_cursor.
// - No capture ring (capture off, or between core incarnations) is telemetry_unavailable.
// - The stream is never gzip; its first batch is read before the 200 header, so a refused cursor is a
//   JSON 409 like the poll. Later batches: every 20 ms one batch of at most 4096 records from the last
//   batch's last_sequence (empty batches included, so a client sees the stream is alive).
// - The stream ends (clean end of the chunked body) when the core disconnects: its ring is replaced.

import { gzip } from 'node:zlib';
import { promisify } from 'node:util';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AX, axisOffset, encodeBatchHeader, HEADER_BYTES, MAX_BATCH_RECORDS, REC, RECORD_BYTES } from '../core/capture/layout.ts';
import { CaptureCursorError, CaptureReader } from '../core/capture/reader.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { CoreLink } from './core-link.ts';
import type { HostTimes } from './timing.ts';
import { Refusal } from './envelope.ts';
import { CursorError, parseAfterCursor } from '../primitives.ts';

const gzipAsync = promisify(gzip);

/** One batch per write about every 20 ms (document 1 part 4; part 8 limit). */
export const STREAM_FLUSH_MS = 20;
/** A stream whose write stays blocked this long is closed (document 1 part 8). */
export const STREAM_WRITE_BLOCK_MS = 5_000;
/** telemetry_busy carries Retry-After 1 (document 1 part 7). */
export const BUSY_RETRY_AFTER_S = 1;


export interface TelemetryContext {
  core: CoreLink;
  machine: CompiledMachine;
  adapterIncarnation: string;
  /** The service's view of the core incarnation (used when the ring carries none). */
  daemonIncarnation: () => string;
  /** Write a refusal as the service writes every JSON Response envelope (operation `telemetry`). */
  refuse: (res: ServerResponse, e: Refusal) => void;
}

/** Parse `after` (profile rules above); throws Refusal invalid_telemetry_cursor. */
export function telemetryCursor(url: URL): bigint {
  try {
    return parseAfterCursor(url.searchParams);
  } catch (e) {
    if (e instanceof CursorError) throw new Refusal(409, 'invalid_telemetry_cursor', e.message);
    throw e;
  }
}

/** True when Accept-Encoding names gzip (or x-gzip, or `*`) with a nonzero q. */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  const text = Array.isArray(header) ? header.join(',') : (header ?? '');
  for (const part of text.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (name !== 'gzip' && name !== 'x-gzip' && name !== '*') continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}

export class TelemetryEndpoints {
  private reader?: { buffer: SharedArrayBuffer; reader: CaptureReader };
  /** Open streams (for tests of the service and for diagnostics). */
  private open = 0;

  constructor(private readonly ctx: TelemetryContext) {}

  get openStreams(): number {
    return this.open;
  }

  /** Test hook: the next `n` ring header samples of this incarnation's reader count as torn (CaptureReader.tearSamples). */
  tearHeaderSamples(n: number): void {
    this.current().reader.tearSamples(n);
  }

  private current(): { buffer: SharedArrayBuffer; reader: CaptureReader } {
    const buffer = this.ctx.core.captureBuffer;
    if (!buffer) throw new Refusal(409, 'telemetry_unavailable', 'no telemetry capture ring (capture off or the core is restarting)');
    if (this.reader?.buffer !== buffer) this.reader = { buffer, reader: new CaptureReader(buffer) };
    return this.reader;
  }

  private identity(reader: CaptureReader) {
    const m = this.ctx.machine;
    return {
      adapter_incarnation: this.ctx.adapterIncarnation,
      daemon_incarnation: reader.daemonIncarnation || this.ctx.daemonIncarnation(),
      machine_sha256: m.machine_sha256,
      deployment_sha256: m.deployment_sha256,
    };
  }

  /** One batch or a Refusal (cursor errors, busy with Retry-After, unavailable). */
  private batch(reader: CaptureReader, after: bigint): Uint8Array {
    let out: Uint8Array | 'busy';
    try {
      out = reader.readBatch(after, MAX_BATCH_RECORDS, this.identity(reader));
    } catch (e) {
      if (e instanceof CaptureCursorError) throw new Refusal(409, e.code, e.message.slice(e.code.length + 2));
      throw e;
    }
    if (out === 'busy') throw new BusyRefusal();
    return this.live(out);
  }

  /** A batch with the replayed core's host times in the service's time base (a paced replay only). */
  private live(b: Uint8Array): Uint8Array {
    const times = this.ctx.core.timing.clock.hostTimes;
    return times ? liveRecords(b, times) : b;
  }

  private fail(res: ServerResponse, e: unknown): void {
    if (!(e instanceof Refusal)) throw e;
    if (e instanceof BusyRefusal) res.setHeader('retry-after', String(BUSY_RETRY_AFTER_S));
    this.ctx.refuse(res, e);
  }

  /** GET /v1/telemetry?after=<sequence> */
  async poll(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    req.resume();
    let body: Uint8Array;
    try {
      const after = telemetryCursor(url);
      body = this.batch(this.current().reader, after);
    } catch (e) {
      return this.fail(res, e);
    }
    const headers: Record<string, string | number> = {
      'content-type': 'application/octet-stream',
      'cache-control': 'no-store',
      vary: 'accept-encoding',
    };
    if (acceptsGzip(req.headers['accept-encoding'])) {
      body = await gzipAsync(body, { level: 1 });
      headers['content-encoding'] = 'gzip';
    }
    headers['content-length'] = body.length;
    res.writeHead(200, headers);
    res.end(body);
  }

  /** GET /v1/telemetry/stream?after=<sequence> */
  stream(req: IncomingMessage, res: ServerResponse, url: URL): void {
    req.resume();
    let ring: { buffer: SharedArrayBuffer; reader: CaptureReader };
    let first: Uint8Array;
    let cursor: bigint;
    try {
      cursor = telemetryCursor(url);
      ring = this.current();
      first = this.batch(ring.reader, cursor);
    } catch (e) {
      return this.fail(res, e);
    }
    const core = this.ctx.core;
    const reader = ring.reader;
    const identity = this.identity(reader);
    let blockTimer: NodeJS.Timeout | undefined;
    let done = false;
    this.open++;
    // A client watching over wall time (a replay paces the core while it does: DecisionLog 'watch').
    core.timing.log.took('watch', 'telemetry', true);

    const cleanup = () => {
      if (done) return;
      done = true;
      this.open--;
      core.timing.log.took('watch', 'telemetry', false);
      clearInterval(tick);
      if (blockTimer) clearTimeout(blockTimer);
      res.off('drain', onDrain);
    };
    const finish = () => {
      cleanup();
      if (!res.writableEnded && !res.destroyed) res.end();
    };
    const onDrain = () => {
      if (blockTimer) clearTimeout(blockTimer);
      blockTimer = undefined;
    };
    const write = (b: Uint8Array) => {
      const view = new DataView(b.buffer, b.byteOffset, HEADER_BYTES);
      cursor = view.getBigUint64(248, true);
      if (!res.write(b) && !blockTimer) {
        blockTimer = setTimeout(() => {
          // A write blocked 5 s: close the stream (document 1 part 8). The client cannot take an orderly
          // end, so the connection goes.
          cleanup();
          res.destroy();
        }, STREAM_WRITE_BLOCK_MS);
      }
    };
    const emptyBatch = (): Uint8Array =>
      encodeBatchHeader({
        ...identity,
        cycle_period_ns: reader.cycleNs,
        first_sequence: 0n,
        last_sequence: cursor,
        dropped: 0n,
        axis_count: reader.axisCount,
        record_count: 0,
      });
    const next = () => {
      if (done) return;
      if (core.captureBuffer !== ring.buffer) return finish(); // the core disconnected
      if (blockTimer || res.writableNeedDrain) return; // still blocked: do not pile batches up
      let b: Uint8Array | 'busy';
      try {
        b = reader.readBatch(cursor, MAX_BATCH_RECORDS, identity);
      } catch (e) {
        if (e instanceof CaptureCursorError) return finish(); // cannot happen within one incarnation
        throw e;
      }
      // A torn ring on an established stream is an empty batch with an unchanged cursor (part 7).
      write(b === 'busy' ? emptyBatch() : this.live(b));
    };

    res.on('drain', onDrain);
    res.once('close', cleanup);
    const tick = setInterval(() => {
      try {
        next();
      } catch (e) {
        process.stderr.write(`internal defect: telemetry stream: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
        cleanup();
        res.destroy();
      }
    }, STREAM_FLUSH_MS);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
    write(first);
  }
}

/** telemetry_busy: the ring header stayed torn over 16 samples; the reply carries Retry-After 1. */
/** Record fields that carry host times whatever the core's clock (its grant and jog deadlines come from the service). */
const HOST_FIELDS = [REC.grant_deadline_host_ns, REC.jog_input_deadline_host_ns];

/**
 * On a paced replay the replayed core writes its records on the recorded clock, which the service does not
 * serve (docs/recording.md "Two clocks"): each record's host times are put into the live time base in the
 * batch (a copy of the ring's bytes) before it is sent, so a client compares them with Status, events and
 * its own clock as on a live run (suites/observation/units.test.ts: telemetry t_ns, a grant's deadline and
 * a mark's event time in request order). A live run never calls this.
 */
export function liveRecords(batch: Uint8Array, times: HostTimes): Uint8Array {
  const dv = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
  const count = dv.getUint32(268, true);
  const axes = dv.getUint32(264, true);
  const fix = (at: number, past: boolean) => dv.setBigUint64(at, times.live(dv.getBigUint64(at, true), past), true);
  // One difference for every record of the batch, the one in force at its last record: a batch is what a
  // client evaluates a stretch of cycles with (a trajectory's records against its points' times), so
  // the spacing between its records stays the recorded one even across a meeting of replay and test.
  let shift: bigint | null = null;
  if (times.coreTimeIsHost && count > 0) {
    const last = dv.getBigUint64(HEADER_BYTES + (count - 1) * RECORD_BYTES + REC.t_ns, true);
    if (last !== 0n) shift = times.live(last, true) - last;
  }
  const move = (at: number) => {
    const t = dv.getBigUint64(at, true);
    if (t !== 0n && shift !== null) dv.setBigUint64(at, t + shift, true);
  };
  for (let r = 0; r < count; r++) {
    const base = HEADER_BYTES + r * RECORD_BYTES;
    for (const f of HOST_FIELDS) fix(base + f, false);
    if (!times.coreTimeIsHost) continue;
    // On the core's own clock: host time only on a recording made on the host clock (the calibration
    // audit times are never written by this core: left as they are).
    move(base + REC.t_ns);
    for (let a = 0; a < axes; a++) move(base + axisOffset(a) + AX.pdo_observed_time_ns);
  }
  return batch;
}

class BusyRefusal extends Refusal {
  constructor() {
    super(409, 'telemetry_busy', 'ring header torn over 16 samples; retry the same cursor');
  }
}
