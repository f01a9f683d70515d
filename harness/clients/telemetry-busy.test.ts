// The telemetry readers (harness/clients/telemetry.ts) and telemetry_busy (document 1 part 7: "Retry-After
// 1; retry same cursor"): a reader that only wants records asks for the same cursor again after the wait it
// was given, up to BUSY_TRIES answers; any other refusal is the target's at once. Before, a correct cell
// that answered telemetry_busy on a loaded host failed whatever test had asked for the newest sequence.

import { afterEach, expect, test, vi } from 'vitest';
import { HarnessError } from '../errors.ts';
import { encodeBatch } from '../oracle/telemetry.ts';
import type { ControlClient, RawReply } from './control.ts';
import { BUSY_TRIES, latestSequence, pollTelemetry, readBatch, readHeader, readSequences } from './telemetry.ts';

afterEach(() => vi.useRealTimers());

const json = (status: number, body: object, headers: Record<string, string> = {}): RawReply => ({
  status,
  headers: { 'content-type': 'application/json', ...headers },
  body: new TextEncoder().encode(JSON.stringify(body)),
});
const busy = (retryAfter = '1') => json(409, { schema: 'svc.rt-control.response.v1', operation: 'telemetry', error: 'telemetry_busy: ring header torn over 16 samples; retry the same cursor' }, { 'retry-after': retryAfter });
const ahead = () => json(409, { schema: 'svc.rt-control.response.v1', operation: 'telemetry', error: 'telemetry_cursor_ahead: after is beyond the ring' });
/** A batch of one record, numbered after the cursor asked for. */
const batchAfter = (after: bigint): RawReply => ({
  status: 200,
  headers: { 'content-type': 'application/octet-stream' },
  body: encodeBatch({ header: { axis_count: 1, first_sequence: after + 1n, last_sequence: after + 1n }, records: [{ seq: after + 1n, ax: [{ position: 0 }] }] }),
});

/** A client whose telemetry polls are answered by `answer` (the n-th poll, its cursor); every path it was asked is kept. */
function client(answer: (n: number, after: bigint) => RawReply, cycle?: bigint) {
  const asked: string[] = [];
  const c = {
    async raw(_method: string, path: string) {
      asked.push(path);
      return answer(asked.length, BigInt(new URL(path, 'http://x').searchParams.get('after')!));
    },
    async status() {
      return { status: 200, label: undefined, reply: { data: cycle === undefined ? {} : { core: { cycle } } } };
    },
  } as unknown as ControlClient;
  return { c, asked };
}

/** Settle `p` while fake time runs; how many polls had been made when `ms` had passed. */
async function pollsAfter(asked: string[], ms: number): Promise<number> {
  await vi.advanceTimersByTimeAsync(ms);
  return asked.length;
}

test.each([
  ['readBatch', (c: ControlClient) => readBatch(c, 41n).then((b) => b.header.last_sequence)],
  ['readSequences', (c: ControlClient) => readSequences(c, 41n).then((b) => b.header.last_sequence)],
  ['readHeader', (c: ControlClient) => readHeader(c, 41n).then((b) => b.header.last_sequence)],
  ['pollTelemetry', (c: ControlClient) => pollTelemetry(c, 41n).then((p) => p.batch!.header.last_sequence)],
])('%s asks for the same cursor again after each telemetry_busy, waiting the Retry-After it was given', async (_name, read) => {
  vi.useFakeTimers();
  const { c, asked } = client((n, after) => (n === 1 ? busy('2') : n === 2 ? busy() : batchAfter(after)));
  const got = read(c);
  // Retry-After 2 on the first answer: no second poll before 2 s have passed, one at 2 s.
  expect(await pollsAfter(asked, 1999)).toBe(1);
  expect(await pollsAfter(asked, 1)).toBe(2);
  // Retry-After 1 on the second.
  expect(await pollsAfter(asked, 999)).toBe(2);
  expect(await pollsAfter(asked, 1)).toBe(3);
  expect(await got).toBe(42n);
  expect(asked).toEqual(['/v1/telemetry?after=41', '/v1/telemetry?after=41', '/v1/telemetry?after=41']);
});

test(`telemetry_busy ${BUSY_TRIES} times running is the target's refusal, after exactly ${BUSY_TRIES} polls`, async () => {
  vi.useFakeTimers();
  const { c, asked } = client(() => busy());
  const got = readSequences(c, 7n).catch((e: unknown) => e);
  await vi.advanceTimersByTimeAsync(60_000);
  const e = (await got) as HarnessError;
  expect(e).toBeInstanceOf(HarnessError);
  expect(e.code).toBe('HIL_ERR_TARGET_REFUSED');
  expect(e.message).toMatch(/^HIL_ERR_TARGET_REFUSED: telemetry poll after=7 refused: 409 .*telemetry_busy.* \(telemetry_busy 5 times running, asked again after each Retry-After\)$/);
  expect(asked).toHaveLength(BUSY_TRIES);
  expect(BUSY_TRIES).toBe(5);
});

test('another refusal is not asked again: it is the target\'s at once', async () => {
  const { c, asked } = client(() => ahead());
  const e = (await readBatch(c, 7n).catch((x: unknown) => x)) as HarnessError;
  expect(e.code).toBe('HIL_ERR_TARGET_REFUSED');
  expect(asked).toEqual(['/v1/telemetry?after=7']);
});

test('latestSequence: telemetry_busy at the hinted cursor asks that cursor again; a cursor ahead of the ring falls back to the start', async () => {
  vi.useFakeTimers();
  // Status says cycle 1000: the walk starts at 936. Busy there once, then answered.
  const a = client((n, after) => (n === 1 ? busy() : batchAfter(after)), 1000n);
  const got = latestSequence(a.c);
  await vi.advanceTimersByTimeAsync(1000);
  expect(await got).toBe(937n);
  expect(a.asked).toEqual(['/v1/telemetry?after=936', '/v1/telemetry?after=936']);
  // Ahead of the ring at the hint: from the start, as before.
  const b = client((n, after) => (n === 1 ? ahead() : batchAfter(after)), 1000n);
  expect(await latestSequence(b.c)).toBe(1n);
  expect(b.asked).toEqual(['/v1/telemetry?after=936', '/v1/telemetry?after=0']);
  // Busy at the start itself: asked again there, not given up.
  const d = client((n, after) => (n <= 2 ? busy() : batchAfter(after)));
  const got2 = latestSequence(d.c);
  await vi.advanceTimersByTimeAsync(2000);
  expect(await got2).toBe(1n);
  expect(d.asked).toEqual(['/v1/telemetry?after=0', '/v1/telemetry?after=0', '/v1/telemetry?after=0']);
});

test("pollTelemetry with busy: 'answer' gives the first answer as it came (the suites of telemetry_busy itself)", async () => {
  const { c, asked } = client(() => busy());
  const p = await pollTelemetry(c, 3n, { busy: 'answer' });
  expect(p.raw.status).toBe(409);
  expect(p.refusal!.label).toBe('telemetry_busy');
  expect(asked).toEqual(['/v1/telemetry?after=3']);
});
