// Typed arrays in notes (a trajectory's times and positions): written as their bytes, read back exactly;
// compared exactly with a live message, and with recordings that wrote them one key per element.

import { expect, test } from 'vitest';
import { noteValue, typedFromNote } from '../../drivers/replay/format.ts';
import { compareNote, FenceMap, normalise, unstamped } from './match.ts';

const oldStyle = (v: unknown) => JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x))) as unknown;

test('a typed array is written as its constructor and bytes and read back bit for bit (NaN, -0, bigints)', () => {
  const pos = new Float64Array([0.1, -0, NaN, 1e300, 0.033932540474068844]);
  const times = new BigInt64Array([0n, 300_000_000n, -1n]);
  const note = JSON.parse(JSON.stringify({ t: 'prepare', position: pos, timeNs: times, generation: 5n }, noteValue)) as Record<string, unknown>;
  expect(note.generation).toBe('5');
  expect(note.position).toEqual({ $typed: 'Float64Array', base64: Buffer.from(pos.buffer).toString('base64') });
  const back = typedFromNote(note.position) as Float64Array;
  expect(back).toBeInstanceOf(Float64Array);
  expect(Buffer.from(back.buffer).equals(Buffer.from(pos.buffer))).toBe(true);
  expect(Object.is(back[1], -0)).toBe(true);
  expect(typedFromNote(note.timeNs)).toEqual(times);
  // a subarray writes only its own elements
  expect(typedFromNote(JSON.parse(JSON.stringify(pos.subarray(3), noteValue)))).toEqual(new Float64Array([1e300, 0.033932540474068844]));
  // not a typed array: plain objects, unknown constructors, extra keys
  expect(typedFromNote({ $typed: 'Float64Array', base64: '', more: 1 })).toBeNull();
  expect(typedFromNote({ $typed: 'Nope', base64: '' })).toBeNull();
  expect(typedFromNote({ 0: 1 })).toBeNull();
});

test('a live message compares exactly with a recorded one in either encoding; one changed element differs in both', () => {
  const live = { t: 'prepare', position: new Float64Array([0.5, 0.033932936646792984]) };
  const recordedNew = normalise({ t: 'prepare', position: new Float64Array([0.5, 0.033932936646792984]) });
  const recordedOld = oldStyle({ t: 'prepare', position: new Float64Array([0.5, 0.033932936646792984]) });
  expect(compareNote(recordedNew, normalise(live), new FenceMap())).toBeNull();
  expect(compareNote(recordedOld, normalise(live), new FenceMap())).toBeNull();
  const changed = { t: 'prepare', position: new Float64Array([0.5, 0.033932540474068844]) };
  expect(compareNote(recordedNew, normalise(changed), new FenceMap())).toMatchObject({ path: 'position.base64' });
  expect(compareNote(recordedOld, normalise(changed), new FenceMap())).toMatchObject({ path: 'position.1', expected: 0.033932936646792984, actual: 0.033932540474068844 });
});

test('the fence and host-time marks come from the protocol (sims/core/protocol.ts), typed fields and payload fields', async () => {
  const { FENCE_FIELDS, HOST_TIME_FIELDS } = await import('./match.ts');
  expect([...FENCE_FIELDS].sort()).toEqual(['Generation', 'Handle', 'JogGeneration', 'active_handle', 'generation', 'handle', 'id', 'jogGeneration', 'jog_generation'].sort());
  expect([...HOST_TIME_FIELDS].sort()).toEqual(['DeadlineHostNs', 'InputDeadlineHostNs', 'SourceOriginHostNs', 'captureNs', 'deadlineNs', 'deadline_ns', 'host_ns', 'inputDeadlineNs', 'nowNs', 'now_ns', 'originNs'].sort());
  // a fence is mapped, a host time skipped, anything else compared
  const fences = new FenceMap();
  expect(compareNote({ t: 'cmd', id: 1, generation: '7', deadlineNs: '5', axisMask: 3 }, { t: 'cmd', id: 9, generation: '42', deadlineNs: '999', axisMask: 3 }, fences)).toBeNull();
  expect(compareNote({ t: 'cmd', id: 2, generation: '7', axisMask: 3 }, { t: 'cmd', id: 10, generation: '43', axisMask: 3 }, fences)).toMatchObject({ path: 'generation' });
  expect(compareNote({ t: 'cmd', axisMask: 3 }, { t: 'cmd', axisMask: 1 }, new FenceMap())).toMatchObject({ path: 'axisMask' });
});

test('a live prepare is compared without its stamp and its workspace (never recorded: tap.ts RecordStamp, core protocol.ts PlanAttachment)', () => {
  const pos = new Float64Array([0.5, 1.5]);
  const recorded = normalise({ t: 'prepare', position: pos, generation: 5n });
  const live = { t: 'prepare', position: pos, generation: 5n, sentNs: 9n, origin: 'x', workspace: { t: new Float64Array(1), q: new Float64Array(2), qd: new Float64Array(2) } };
  expect(unstamped(live)).toEqual({ t: 'prepare', position: pos, generation: 5n });
  expect(compareNote(recorded, normalise(unstamped(live)), new FenceMap())).toBeNull();
  // Only those three: any other field of the live message is still compared.
  expect(compareNote(recorded, normalise(unstamped({ ...live, handle: 3n })), new FenceMap())).not.toBeNull();
});
