// The OLP server's telemetry window read from the control service (document 3 part 4), from the inside with
// a scripted link: a `409 telemetry_busy` (document 1 part 7: the ring header was torn while it was read;
// "Retry-After 1; retry same cursor") is asked again with the same cursor after a second, a bounded number of
// times; any other refusal is telemetry_unavailable at once.

import { afterEach, expect, test, vi } from 'vitest';
import { TELEMETRY_BUSY_RETRIES, TELEMETRY_BUSY_RETRY_MS } from './execution.ts';
import { session } from './test-session.ts';
import type { ControlLink } from './control.ts';
import { AXIS_ARRAY_OFFSET, BATCH_MAGIC, HEADER_BYTES, RECORD_BYTES } from '../core/capture/layout.ts';

afterEach(() => {
  vi.useRealTimers();
});

/** A TelemetryBatchHeaderV1 batch of one axis holding the records with these sequences (every 10th kept by the window). */
function batch(seqs: bigint[]): Buffer {
  const b = Buffer.alloc(HEADER_BYTES + seqs.length * RECORD_BYTES);
  b.writeUInt32LE(BATCH_MAGIC, 0);
  b.writeUInt16LE(1, 4);
  b.writeUInt16LE(HEADER_BYTES, 6);
  b.writeBigUInt64LE(seqs.at(-1) ?? 0n, 248);
  b.writeUInt32LE(1, 264);
  b.writeUInt32LE(seqs.length, 268);
  b.writeUInt32LE(RECORD_BYTES, 272);
  seqs.forEach((seq, i) => {
    const o = HEADER_BYTES + i * RECORD_BYTES;
    b.writeBigUInt64LE(1_000_000n * seq, o);
    b.writeBigUInt64LE(seq, o + 8);
    b.writeInt32LE(500, o + AXIS_ARRAY_OFFSET);
  });
  return b;
}

const refusal = (label: string) => ({ status: 409, bytes: Buffer.from(JSON.stringify({ schema: 'svc.rt-control.response.v1', operation: 'telemetry', error: `${label}: detail` })) });

/** A link whose telemetry answers are scripted one by one; status reports no core cycle (no hint). */
function scripted(answers: Array<{ status: number; bytes: Buffer }>) {
  const asked: string[] = [];
  const link = {
    async status() {
      return { data: {} };
    },
    async raw(_method: string, path: string) {
      asked.push(path);
      const a = answers.shift();
      if (!a) throw new Error(`no answer scripted for ${path}`);
      return a;
    },
  } as unknown as ControlLink;
  return { link, asked };
}

test('telemetry_busy is asked again with the same cursor after a second; the window then holds the records', async () => {
  vi.useFakeTimers();
  const s = scripted([refusal('telemetry_busy'), refusal('telemetry_busy'), { status: 200, bytes: batch([10n, 11n, 20n]) }]);
  const window = session(s.link).telemetryWindow(1000);
  // Nothing is asked again before the second the service named has passed.
  await vi.advanceTimersByTimeAsync(TELEMETRY_BUSY_RETRY_MS - 1);
  expect(s.asked).toEqual(['/v1/telemetry?after=0']);
  await vi.advanceTimersByTimeAsync(1 + TELEMETRY_BUSY_RETRY_MS);
  const w = await window;
  expect(s.asked).toEqual(['/v1/telemetry?after=0', '/v1/telemetry?after=0', '/v1/telemetry?after=0']);
  expect((w.samples as Array<{ seq: bigint; position: number[] }>).map((x) => [x.seq, x.position])).toEqual([
    [10n, [0.5]],
    [20n, [0.5]],
  ]);
});

test(`telemetry_busy more than ${TELEMETRY_BUSY_RETRIES} times in a row, or any other refusal, is telemetry_unavailable`, async () => {
  vi.useFakeTimers();
  const busy = scripted(Array.from({ length: TELEMETRY_BUSY_RETRIES + 1 }, () => refusal('telemetry_busy')));
  const failing = expect(session(busy.link).telemetryWindow(1000)).rejects.toMatchObject({ status: 409, code: 'telemetry_unavailable' });
  await vi.advanceTimersByTimeAsync(TELEMETRY_BUSY_RETRIES * TELEMETRY_BUSY_RETRY_MS);
  await failing;
  expect(busy.asked).toHaveLength(TELEMETRY_BUSY_RETRIES + 1);
  const other = scripted([refusal('telemetry_unavailable')]);
  await expect(session(other.link).telemetryWindow(1000)).rejects.toMatchObject({ status: 409, code: 'telemetry_unavailable' });
  expect(other.asked).toEqual(['/v1/telemetry?after=0']);
});
