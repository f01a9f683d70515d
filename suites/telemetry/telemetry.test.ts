// Telemetry polling (document 1 part 2 "Telemetry binary records", part 4 "Observation endpoints",
// part 7 "Telemetry and events", part 8 limits, part 9 versioning). Batches are decoded only with the
// harness oracle (harness/oracle/telemetry.ts); no session is ever used to read them.

import { gunzipSync } from 'node:zlib';
import { latestSequence, pollTelemetry, readBatch, readHeader, readSequences } from '../../harness/clients/telemetry.ts';
import { codeOf, isOracleError } from '../../harness/oracle/errors.ts';
import {
  AXIS_FIELDS,
  checkBatchCursor,
  decodeBatch,
  decodeBatchHeader,
  HEADER_BYTES,
  MAX_BATCH_BYTES,
  RECORD_BYTES,
  RECORD_FIELDS,
  RECORD_LAYOUT_DIGEST,
  type CycleCaptureRecordV2,
} from '../../harness/oracle/telemetry.ts';
import { covers, describe, expect, hostBound, steppedCell, test } from '../../harness/fixture.ts';
import { problems } from '../../harness/problems.ts';

const HEX32 = /^[0-9a-f]{32}$/;
const U64_MAX = (1n << 64n) - 1n;

const HEADER_LAYOUT = [
  'magic', 'version', 'header_bytes', 'adapter_incarnation', 'machine_sha256', 'deployment_sha256', 'record_layout_digest',
  'cycle_period_ns', 'first_sequence', 'last_sequence', 'dropped', 'axis_count', 'record_count', 'record_bytes', 'reserved',
  'daemon_incarnation',
].map((f) => `layout:telemetry_header:${f}`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** About the newest `n` records (one poll to find the newest, one from newest - n). */
async function recent(client: Parameters<typeof readBatch>[0], n: bigint) {
  const newest = await latestSequence(client);
  return readBatch(client, newest > n ? newest - n : 0n);
}

/**
 * At least `n` records the core captured after sequence `after` (polled as the core produces them). The
 * records of an idle cell must be the test's own: the newest records from before it began may carry a grant
 * the previous test, or the rig's re-closing of the E-stop chain (harness/targets/rig.ts settle), held.
 */
async function capturedAfter(client: Parameters<typeof readBatch>[0], after: bigint, n: number): Promise<CycleCaptureRecordV2[]> {
  const records: CycleCaptureRecordV2[] = [];
  let cursor = after;
  // A core that captures nothing for this many polls fails below on the record count, not by hanging.
  for (let polls = 0; records.length < n && polls < 200; polls++) {
    const b = await readBatch(client, cursor);
    records.push(...b.records);
    if (b.records.length > 0) cursor = b.records[b.records.length - 1]!.seq;
    else await sleep(10);
  }
  return records;
}

describe('batch header', () => {
  test(
    'a poll without a session answers one little-endian application/octet-stream batch whose header names the service, the core, the machine and the layout',
    covers(
      'endpoint:GET /v1/telemetry', 'capability:telemetry', 'rule:telemetry.no_session', 'rule:telemetry.little_endian', 'rule:telemetry.batch_shape',
      'rule:telemetry.reader_checks', 'rule:versioning.telemetry_header', 'limit:telemetry_header_bytes', 'limit:telemetry_record_bytes',
      'limit:telemetry_header_version', 'limit:telemetry_axis_count', ...HEADER_LAYOUT,
    ),
    async ({ client, description }) => {
      await sleep(50); // let the core capture a few cycles
      const p = await pollTelemetry(client, 0n);
      expect(p.raw.status).toBe(200);
      expect(p.raw.headers['content-type']).toBe('application/octet-stream');
      expect(p.raw.headers['content-encoding']).toBeUndefined();
      const bytes = p.bytes!;
      // Little-endian: the magic 0x31425452 is the bytes 52 54 42 31 ("RTB1"), version 1 is 01 00.
      expect([...bytes.subarray(0, 6)]).toEqual([0x52, 0x54, 0x42, 0x31, 0x01, 0x00]);
      const { header: h, records } = p.batch!;
      expect(h.magic).toBe(0x31425452);
      expect(h.version).toBe(1);
      expect(h.header_bytes).toBe(HEADER_BYTES);
      expect(h.header_bytes).toBe(312);
      expect(h.record_bytes).toBe(RECORD_BYTES);
      expect(h.record_bytes).toBe(5392);
      expect(h.record_layout_digest).toBe(RECORD_LAYOUT_DIGEST);
      expect(h.reserved).toBe(0);
      expect(h.axis_count).toBe(description.axes.length);
      expect(h.axis_count).toBeGreaterThanOrEqual(1);
      expect(h.axis_count).toBeLessThanOrEqual(16);
      expect(h.adapter_incarnation).toMatch(HEX32);
      expect(h.adapter_incarnation).toBe(description.adapter_incarnation);
      expect(h.daemon_incarnation).toMatch(HEX32);
      expect(h.daemon_incarnation).toBe(description.daemon_incarnation);
      expect(h.machine_sha256).toBe(description.machine_sha256);
      expect(h.deployment_sha256).toBe(description.deployment_sha256);
      expect(h.cycle_period_ns).toBe(description.cycle_ns);
      // Batch shape: header + exactly record_count records.
      expect(h.record_count).toBeGreaterThan(0);
      expect(bytes.length).toBe(312 + h.record_count * 5392);
      expect(records.length).toBe(h.record_count);
      expect(h.first_sequence).toBe(records[0]!.seq);
      expect(h.last_sequence).toBe(records.at(-1)!.seq);
      expect(h.dropped).toBeTypeOf('bigint');
      checkBatchCursor(h, 0n);
    },
  );

  test(
    'a reader refuses a batch whose layout digest differs, with both digests; the header checks come before the body',
    covers('rule:telemetry.reader_checks'),
    async ({ client }) => {
      const p = await pollTelemetry(client, 0n);
      const bytes = p.bytes!;
      // A reader built for another layout refuses the real batch and names both digests.
      const other = 'f'.repeat(64);
      try {
        decodeBatch(bytes, { expectedLayoutDigest: other });
        expect.unreachable('a layout mismatch must refuse the batch');
      } catch (e) {
        expect(isOracleError(e, 'telemetry_layout_mismatch')).toBe(true);
        expect((e as { detail: Record<string, unknown> }).detail).toMatchObject({ expected: other, actual: RECORD_LAYOUT_DIGEST });
      }
      // The checks run on the header alone, in the documented order, before any of the body is read.
      const head = bytes.slice(0, HEADER_BYTES);
      expect(decodeBatchHeader(head).record_count).toBe(p.batch!.header.record_count);
      const bad = head.slice();
      bad[168] ^= 1; // layout digest
      expect(codeOf(() => decodeBatchHeader(bad))).toBe('telemetry_layout_mismatch');
      bad[0] ^= 1; // magic first
      expect(codeOf(() => decodeBatchHeader(bad))).toBe('telemetry_magic');
      expect(codeOf(() => decodeBatch(bytes.subarray(0, bytes.length - 1)))).toBe('telemetry_length');
    },
  );
});

describe('cursor', () => {
  test(
    'after=0 starts at sequence 1 (or reports overwritten history in dropped); sequences are contiguous; resuming from last_sequence continues without gap',
    covers('rule:telemetry.cursor_start', 'rule:telemetry.cursor_contiguous', 'rule:telemetry.cursor_resume', 'layout:telemetry_header:first_sequence', 'layout:telemetry_header:last_sequence', 'layout:telemetry_header:dropped'),
    async ({ client, description }) => {
      const cycleMs = Number(description.cycle_ns as bigint) / 1e6;
      let polled = performance.now();
      const b0 = await readBatch(client, 0n);
      expect(b0.header.first_sequence).toBe(b0.header.dropped + 1n);
      // The first record returned is the oldest retained one: sequence 1 unless history was overwritten.
      expect(b0.records[0]!.seq).toBe(b0.header.dropped + 1n);
      let after = b0.header.last_sequence;
      // How long the ring keeps the records after the cursor, ms. A ring that has overwritten history (a
      // service running longer than its retention: a shared target) keeps the oldest at most one cycle
      // each: the cursor after a batch from the oldest is that batch's records ahead of the overwriting.
      // A harness kept from polling longer than that lost them to the ring, as document 1 part 4 says it
      // may ("overwritten history is reported in dropped"): the host's, not the target's.
      let slackMs = b0.header.dropped > 0n ? b0.header.record_count * cycleMs : Infinity;
      for (let k = 0; k < 5; k++) {
        // Wait for new cycles (ten of the fixture's 1 ms cycles normally; a loaded machine may run none in
        // 10 ms, so poll again until some are captured; the bound is a safety net, no timing is asserted).
        // Only the sequences are decoded: a poll that took seconds on a loaded host left thousands of
        // records for the next, and decoding each whole batch again outran the test's time.
        let b = await readSequences(client, after); // checkBatchCursor: starts at after + dropped + 1
        for (const stop = Date.now() + 10_000; b.header.record_count === 0 && Date.now() < stop; b = await readSequences(client, after)) await sleep(10);
        const at = performance.now();
        expect(b.header.record_count).toBeGreaterThan(0);
        await hostBound(
          { rule: 'document 1 part 4 telemetry cursor: a poll resuming from last_sequence before the ring overwrote it drops nothing', marginMs: slackMs, measured: () => ({ ms: Math.round(at - polled), what: 'from sending the previous poll to this one answered, the ring overwriting its oldest records' }) },
          async () => expect(b.header.dropped).toBe(0n),
        );
        expect(b.seqs[0]).toBe(after + 1n);
        expect(b.header.last_sequence).toBe(after + BigInt(b.header.record_count));
        after = b.header.last_sequence;
        slackMs += b.header.record_count * cycleMs - (at - polled);
        polled = at;
      }
    },
  );

  test(
    'a caught-up poll answers an empty batch: first_sequence 0, last_sequence after + dropped, record_count 0',
    covers('rule:telemetry.cursor_empty_batch', 'layout:telemetry_header:record_count', 'layout:telemetry_header:first_sequence', 'layout:telemetry_header:last_sequence', 'reason:telemetry_cursor_ahead'),
    async ({ variant }) => {
      // On the stepped clock no record is written between polls, so "caught up" is exact: at 1 kHz in real
      // time a poll slower than one cycle (a loaded machine) would never see an empty batch.
      const target = await variant({ clock: 'stepped' });
      const client = target.client();
      await target.step!(25);
      const after = await latestSequence(client);
      expect(after).toBeGreaterThanOrEqual(25n);
      const p = await pollTelemetry(client, after);
      const h = p.batch!.header;
      expect(h.record_count).toBe(0);
      expect(h.first_sequence).toBe(0n);
      expect(h.last_sequence).toBe(after + h.dropped);
      expect(h.dropped).toBe(0n);
      expect(p.bytes!.length).toBe(312);
      // One past the newest is already ahead (the boundary of telemetry_cursor_ahead, exact on this clock).
      const ahead = await pollTelemetry(client, after + 1n);
      expect({ status: ahead.raw.status, label: ahead.refusal?.label }).toEqual({ status: 409, label: 'telemetry_cursor_ahead' });
      // and one step later the same cursor gets exactly that one record
      await target.step!(1);
      const q = await pollTelemetry(client, after);
      expect(q.batch!.header).toMatchObject({ record_count: 1, first_sequence: after + 1n, last_sequence: after + 1n });
    },
  );

  test(
    'a cursor beyond the newest sequence answers 409 telemetry_cursor_ahead as a JSON Response',
    covers('reason:telemetry_cursor_ahead', 'rule:telemetry.errors_json_409'),
    async ({ client }) => {
      const newest = await latestSequence(client);
      for (const after of [newest + 1_000_000_000n, U64_MAX]) {
        const p = await pollTelemetry(client, after);
        expect(p.raw.status).toBe(409);
        expect(p.raw.headers['content-type']).toMatch(/^application\/json/);
        expect(p.refusal!.label).toBe('telemetry_cursor_ahead');
        expect(p.refusal!.reply.operation).toBe('telemetry');
      }
    },
  );

  test(
    'a malformed cursor answers 409 invalid_telemetry_cursor as a JSON Response (profile: one canonical unsigned decimal, at most once)',
    covers('reason:invalid_telemetry_cursor', 'rule:telemetry.errors_json_409'),
    async ({ client }) => {
      for (const q of ['after=abc', 'after=-1', 'after=01', 'after=%2B1', 'after=1.5', 'after=', 'after=1&after=2', 'after=18446744073709551616', 'after=%201']) {
        const p = await pollTelemetry(client, q);
        expect(p.raw.status, q).toBe(409);
        expect(p.raw.headers['content-type']).toMatch(/^application\/json/);
        expect(p.refusal!.label, q).toBe('invalid_telemetry_cursor');
        expect(p.refusal!.reply.operation).toBe('telemetry');
      }
      // Absent is 0.
      const p = await pollTelemetry(client, undefined);
      expect(p.raw.status).toBe(200);
      checkBatchCursor(p.batch!.header, 0n);
    },
  );
});

describe('encoding and limits', () => {
  test('Accept-Encoding gzip answers Content-Encoding gzip of the same batch; without it the batch is plain', covers('rule:telemetry.gzip', 'endpoint:GET /v1/telemetry'), async ({ client }) => {
    // The 100 records before the newest: a fresh stack (a recorded run starts one per test) may not have
    // captured that many yet, so wait until it has (a safety bound, no timing is asserted).
    let newest = await latestSequence(client);
    for (const stop = Date.now() + 10_000; newest <= 100n && Date.now() < stop; newest = await latestSequence(client)) await sleep(20);
    const from = newest - 100n;
    const g = await pollTelemetry(client, from, { acceptEncoding: 'gzip, deflate' });
    expect(g.raw.status).toBe(200);
    expect(g.raw.headers['content-encoding']).toBe('gzip');
    expect(g.raw.headers['content-type']).toBe('application/octet-stream');
    const bytes = new Uint8Array(gunzipSync(g.raw.body));
    const b = decodeBatch(bytes);
    checkBatchCursor(b.header, from);
    expect(g.raw.body.length).toBeLessThan(bytes.length);
    const plain = await pollTelemetry(client, from, { acceptEncoding: 'identity' });
    expect(plain.raw.headers['content-encoding']).toBeUndefined();
    decodeBatch(plain.raw.body);
    // q=0 means "not acceptable" (RFC 9110 12.5.3): gzip refused by weight is answered plain.
    for (const refused of ['gzip;q=0', 'gzip; q=0.000, identity']) {
      const r = await pollTelemetry(client, from, { acceptEncoding: refused });
      expect({ refused, encoding: r.raw.headers['content-encoding'] }).toEqual({ refused, encoding: undefined });
      decodeBatch(r.raw.body);
    }
  });

  test(
    'a batch holds at most 4096 records (22085944 bytes) however far behind the cursor is',
    covers('limit:telemetry_batch_records', 'limit:telemetry_batch_bytes', 'layout:telemetry_header:record_count'),
    async ({ client: own, description: ownDescription, cell, drive, op, target, variant, skip }) => {
      // More than 4096 records must exist: 4.1 s of cycles at 1 ms, 41 s at the longest cycle document 3
      // allows (10 ms). A cell on the stepped clock (the sim target's variant) runs them as fast as the host
      // steps it; any other cell is waited for in its own real time.
      const stepped = await steppedCell({ cell, client: own, description: ownDescription, drive, op, target, skip }, variant);
      const x = 'x' in stepped ? stepped.x : undefined;
      const client = x?.client ?? own;
      const description = x?.description ?? ownDescription;
      const cycleMs = Number(description.cycle_ns as bigint) / 1e6;
      let newest = await latestSequence(client);
      const deadline = Date.now() + 4200 * cycleMs + 40_000; // a loaded machine runs cycles late: a safety bound, not a timing check
      while (newest <= 4096n && Date.now() < deadline) {
        const ms = Math.max(50, Number(4097n - newest) * cycleMs);
        // On the stepped clock, the 200 records the cursor below keeps behind the newest too.
        if (x?.drive.stepped) await x.drive.elapse(ms + 250 * cycleMs);
        else await sleep(ms);
        newest = await latestSequence(client);
      }
      // Far behind, but inside what the ring still holds: a fresh stack has not filled its ring, but a
      // service that has run for long (a shared target) has, and a batch read from its very oldest end loses
      // the records the writer overwrites during the copy (record_count is "at most min(ring capacity,
      // 4096)", part 2). With nothing dropped at the cursor, 4096 newer records must give a full batch.
      let full = false;
      for (let attempt = 0; attempt < 5 && !full; attempt++) {
        newest = await latestSequence(client);
        const cursor = newest > 4096n + 200n ? newest - 4096n - 200n : 0n;
        const { header, length } = await readHeader(client, cursor);
        expect(header.record_count).toBeLessThanOrEqual(4096);
        expect(length).toBeLessThanOrEqual(MAX_BATCH_BYTES);
        expect(length).toBe(312 + header.record_count * 5392);
        if (header.dropped !== 0n) continue; // the ring no longer held the cursor's successor: closer next time
        expect(header.record_count).toBe(4096);
        expect(header.first_sequence).toBe(cursor + 1n);
        expect(header.last_sequence).toBe(header.first_sequence + 4095n);
        expect(length).toBe(22085944);
        // And the full batch decodes.
        const p = await pollTelemetry(client, cursor);
        expect(p.batch!.records.length).toBe(4096);
        full = true;
      }
      expect(full, 'a full batch of 4096 records from a retained cursor').toBe(true);
    },
  );
});

describe('record layout', () => {
  test(
    'every record carries its cycle time, sequence, cycle count, work and jitter; axes is the axis count; unused axis slots are zero',
    covers(
      'layout:capture_record:t_ns', 'layout:capture_record:seq', 'layout:capture_record:cycle', 'layout:capture_record:work_ns', 'layout:capture_record:axes',
      'layout:capture_record:reserved', 'layout:capture_record:cycle_jitter_ns', 'layout:capture_record:ax', 'rule:telemetry.unused_axes_zero',
    ),
    async ({ client, description }) => {
      await sleep(30);
      const b = await recent(client, 300n);
      const n = description.axes.length;
      const bad = problems();
      let prev: CycleCaptureRecordV2 | undefined;
      let worked = false;
      for (const r of b.records) {
        const at = `seq ${r.seq}`;
        bad.add(r.axes === n, `${at}: axes ${r.axes}`);
        bad.add(r.reserved === 0, `${at}: reserved ${r.reserved}`);
        bad.add(r.t_ns > 0n, `${at}: t_ns 0`);
        bad.add(r.ax.length === 16, `${at}: ${r.ax.length} axis slots`);
        // cycle_jitter_ns is signed (wake minus scheduled); a sane target stays well within a second.
        bad.add(r.cycle_jitter_ns < 1_000_000_000n && r.cycle_jitter_ns > -1_000_000_000n, `${at}: jitter ${r.cycle_jitter_ns}`);
        if (r.work_ns > 0n) worked = true;
        if (prev) {
          bad.add(r.seq === prev.seq + 1n, `${at}: not contiguous`);
          bad.add(r.t_ns > prev.t_ns, `${at}: t_ns not increasing`);
          bad.add(r.cycle > prev.cycle, `${at}: cycle not increasing`);
        }
        for (let a = n; a < 16; a++) {
          for (const [k, v] of Object.entries(r.ax[a]!)) bad.add(Array.isArray(v) ? v.every((x) => x === 0) : v === 0 || v === 0n, `${at}: unused ax[${a}].${k} nonzero`);
        }
        prev = r;
      }
      expect(bad.list).toEqual([]);
      expect(b.records.length).toBeGreaterThan(10);
      expect(worked).toBe(true);
      // The cycle's scheduled time (t_ns less cycle_jitter_ns, wake minus scheduled) advances by about the
      // cycle period per cycle: t_ns is in nanoseconds and `cycle` counts cycles. Judged on the median step,
      // not the span: a core that woke late says so in cycle_jitter_ns, and one that fell far behind may
      // skip cycles to catch up (a host that starved the reference core for 4 ms a cycle once moved the
      // span's mean to 3.6 periods, and the record was right).
      const steps: number[] = [];
      for (let i = 1; i < b.records.length; i++) {
        const [p, r] = [b.records[i - 1]!, b.records[i]!];
        if (r.cycle > p.cycle) steps.push(Number(r.t_ns - r.cycle_jitter_ns - (p.t_ns - p.cycle_jitter_ns)) / Number(r.cycle - p.cycle));
      }
      steps.sort((x, y) => x - y);
      const perCycle = steps[Math.floor(steps.length / 2)]!;
      expect(perCycle).toBeGreaterThan(Number(description.cycle_ns as bigint) * 0.5);
      expect(perCycle).toBeLessThan(Number(description.cycle_ns as bigint) * 2);
    },
  );

  const laneRecordFields = RECORD_FIELDS.filter(([, , name]) => !['t_ns', 'seq', 'cycle', 'work_ns', 'axes', 'reserved', 'cycle_jitter_ns'].includes(name));
  test(
    'every other documented field decodes at its documented offset with its documented type and range; an idle cell runs no trajectory and no jog',
    covers(...laneRecordFields.map(([, , name]) => `layout:capture_record:${name}`), ...AXIS_FIELDS.map(([, , name]) => `layout:capture_axis:${name}`)),
    async ({ client, description }) => {
      const records = await capturedAfter(client, await latestSequence(client), 50);
      const range: Record<string, [bigint, bigint]> = {
        u8: [0n, 0xffn], i8: [-0x80n, 0x7fn], u16: [0n, 0xffffn], i16: [-0x8000n, 0x7fffn],
        u32: [0n, 0xffffffffn], i32: [-0x80000000n, 0x7fffffffn], u64: [0n, U64_MAX], i64: [-(1n << 63n), (1n << 63n) - 1n],
        'u8[16]': [0n, 0xffn], 'i32[16]': [-0x80000000n, 0x7fffffffn],
      };
      const bad = problems();
      const check = (v: unknown, type: string, what: string) => {
        const [lo, hi] = range[type]!;
        const values = Array.isArray(v) ? v : [v];
        if (type.endsWith('[16]')) bad.add(values.length === 16, `${what}: ${values.length} elements`);
        for (const x of values) {
          const ok = typeof x === (type === 'u64' || type === 'i64' ? 'bigint' : 'number') && BigInt(x as number | bigint) >= lo && BigInt(x as number | bigint) <= hi;
          bad.add(ok, `${what}: ${String(x)} is not a ${type}`);
        }
      };
      for (const r of records) {
        for (const [, type, name] of RECORD_FIELDS) check((r as unknown as Record<string, unknown>)[name], type, name);
        for (let a = 0; a < description.axes.length; a++) for (const [, type, name] of AXIS_FIELDS) check((r.ax[a] as unknown as Record<string, unknown>)[name], type, `ax[${a}].${name}`);
        // Documented meanings that hold on a cell nobody is driving.
        bad.add(r.active_mode === 0, `seq ${r.seq}: active_mode ${r.active_mode} on an idle cell`); // 0 idle, 2 trajectory, 3 jog
        bad.add(r.jog_session_open === 0, `seq ${r.seq}: jog_session_open without a jog`);
        bad.add(r.grant_active === 0, `seq ${r.seq}: grant_active without a grant`);
        bad.add(r.armed === 0, `seq ${r.seq}: armed on an idle cell`);
      }
      expect(bad.list).toEqual([]);
      expect(records.length).toBeGreaterThanOrEqual(50);
    },
  );
});
