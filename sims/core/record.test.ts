// The core's unchecked cycle record writer (record.ts captureCycle: typed array views, no zero fill of a
// slot that only ever held cycle records) against the checked one (captureCycleChecked: RecordWriter
// setters on a zeroed slot): over random process images and core states, with the ring wrapping so every
// slot is reused, both rings hold byte-identical buffers after every cycle. core.test.ts and
// capture.test.ts check the checked writer's bytes against the oracle.

import type { CompiledMachine } from '../config/types.ts';
import { JogLane } from './jog.ts';
import { LaneArbiter } from './lanes.ts';
import { TrajectoryLane } from './trajectory.ts';
import { expect, test } from 'vitest';
import fc from 'fast-check';
import { ProcessImage } from '../../drivers/bus.ts';
import { AX, REC, axisOffset } from './capture/layout.ts';
import { CaptureRing, W_TOUCHED } from './capture/ring.ts';
import { captureCycle, captureCycleChecked, type CaptureSource } from './record.ts';

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const i64 = fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n });
const int = (bits: number, signed: boolean) => (signed ? fc.integer({ min: -(2 ** (bits - 1)), max: 2 ** (bits - 1) - 1 }) : fc.integer({ min: 0, max: 2 ** bits - 1 }));
// Values as the core may hold them, including ones the setters must wrap the same way (negative masks).
const mask = fc.oneof(int(32, false), int(32, true));

interface Cycle {
  src: Omit<CaptureSource, 'image' | 'n' | 'observedNs' | 'observedWords' | 'trajectory' | 'jog' | 'lanes' | 'motionState' | 'preparedPlan' | 'lastEvent'>;
  axes: Array<Record<string, number>>;
  observed: bigint[];
  io: [number, number, number, number, number, number];
  nowNs: bigint;
  lateness: number;
  workNs: number;
  enabled: number;
}

const axisArb = fc.record({
  controlword: int(16, false),
  targetPosition: int(32, true),
  statusword: int(16, false),
  modeDisplay: int(8, true),
  positionActual: int(32, true),
  velocityActual: int(32, true),
  followingError: int(32, true),
  torqueActual: int(16, true),
  errorCode: int(16, false),
  digitalInputs: int(32, false),
  pdoFresh: fc.integer({ min: 0, max: 2 }),
  absolutePosition: int(32, true),
  absoluteValid: fc.integer({ min: 0, max: 2 }),
  alState: fc.constantFrom(0, 1, 2, 4, 8, 255),
  online: fc.integer({ min: 0, max: 2 }),
});

const cycleArb = (n: number): fc.Arbitrary<Cycle> =>
  fc.record({
    src: fc.record({
      grant: fc.record({ generation: u64, deadlineNs: u64, active: fc.boolean(), axisMask: mask }),
      cycleCount: fc.maxSafeNat(),
      homeEpoch: u64,
      busReturn: fc.oneof(int(32, true), fc.constantFrom(-1000, -1001, 0)),
      armed: fc.boolean(),
      faults: fc.record({ safetyFaultMask: mask, bits: mask }),
      homeValidMask: mask,
      ioConfigured: fc.boolean(),
      ioArmed: fc.boolean(),
    }),
    axes: fc.array(axisArb, { minLength: n, maxLength: n }),
    observed: fc.array(i64, { minLength: n, maxLength: n }),
    io: fc.tuple(int(16, false), int(32, false), int(8, false), mask, int(32, false), int(32, false)),
    nowNs: u64,
    lateness: fc.oneof(fc.maxSafeInteger(), fc.integer()),
    workNs: fc.oneof(fc.double({ min: -1e3, max: 1e12, noNaN: true }), fc.constant(0)),
    enabled: mask,
  });

function source(n: number, c: Cycle): CaptureSource {
  const image = new ProcessImage(n);
  c.axes.forEach((a, i) => {
    for (const [k, v] of Object.entries(a)) (image[k as keyof ProcessImage] as unknown as number[])[i] = v;
  });
  [image.ioOutputWord, image.ioInputWord, image.ioInputValid, image.safetyChainClosed, image.wkcActual, image.wkcExpected] = c.io;
  const observedNs = BigInt64Array.from(c.observed);
  // An idle cell: no trajectory, no jog (the fast path's domain; motion cycles take the checked path).
  const machine = { axes: Array.from({ length: n }, () => ({ counts_per_unit: 1, sign: 1, jog_acceleration: 1, max_velocity: 1, min_position: -1, max_position: 1, completion_tolerance: 0 })), jog_arrest_ns: 1n, jog_quick_stop_ns: 1n } as unknown as CompiledMachine;
  const idle = { trajectory: new TrajectoryLane(n, () => undefined), jog: new JogLane(machine, () => undefined), lanes: new LaneArbiter(n), motionState: 0, preparedPlan: null, lastEvent: 0 };
  return { ...c.src, ...idle, image, n, observedNs, observedWords: new Uint32Array(observedNs.buffer) };
}

function same(a: CaptureRing, b: CaptureRing): void {
  const x = new Uint8Array(a.buffer);
  const y = new Uint8Array(b.buffer);
  let first = -1;
  for (let k = 0; k < x.length && first < 0; k++) if (x[k] !== y[k]) first = k;
  expect(first, `first differing byte ${first}`).toBe(-1);
}

for (const n of [1, 9, 16]) {
  test(`unchecked cycle record is byte-identical to the checked one on reused slots (${n} axes)`, () => {
    fc.assert(
      fc.property(fc.array(cycleArb(n), { minLength: 1, maxLength: 12 }), (cycles) => {
        const fast = new CaptureRing({ axisCount: n, cycleNs: 1_000_000n, capacity: 3 });
        const checked = new CaptureRing({ axisCount: n, cycleNs: 1_000_000n, capacity: 3 });
        for (const c of cycles) {
          const s = source(n, c);
          captureCycle(s, fast, c.nowNs, c.lateness, c.workNs, c.enabled);
          captureCycleChecked(s, checked, c.nowNs, c.lateness, c.workNs, c.enabled);
          same(fast, checked);
        }
        expect(fast.newest).toBe(cycles.length);
      }),
      { numRuns: n === 9 ? 300 : 100 },
    );
  });
}

test('a slot that held a record written through the checked API is zeroed before a cycle record reuses it', () => {
  const fc9 = fc.sample(cycleArb(9), { numRuns: 3, seed: 42 });
  const fast = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 2 });
  const checked = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 2 });
  // Fields no cycle record writes, set in slot 0 of both rings.
  const extra = { active_traj_id: 7n, queue_depth: 5 };
  const axisExtra = [{ collision_trip_count: 3n, native_home_position_offset: -9, ext_valid_mask: 0xffff }];
  fast.writeRecord(extra, axisExtra);
  checked.writeRecord(extra, axisExtra);
  for (const c of fc9) {
    const s = source(9, c);
    captureCycle(s, fast, c.nowNs, c.lateness, c.workNs, c.enabled);
    captureCycleChecked(s, checked, c.nowNs, c.lateness, c.workNs, c.enabled);
  }
  same(fast, checked);
  // Record 3 reused slot 0: the extra fields are gone (the slot was zeroed), not left over.
  const dv = new DataView(fast.buffer);
  const slot0 = 128;
  expect(dv.getBigUint64(slot0 + REC.seq, true)).toBe(3n);
  expect(dv.getBigUint64(slot0 + REC.active_traj_id, true)).toBe(0n);
  expect(dv.getBigUint64(slot0 + axisOffset(0) + AX.collision_trip_count, true)).toBe(0n);
});

test('without zeroing, a field the cycle writer skipped would survive reuse (the byte comparison can fail)', () => {
  // Guard for the comparison above: a cycle record over a slot with left-over bytes differs from a checked
  // record; the unchecked writer never zeroes on a ring of cycle records only, so only rewriting every
  // field keeps it identical.
  const [c] = fc.sample(cycleArb(1), { numRuns: 1, seed: 7 });
  const fast = new CaptureRing({ axisCount: 1, cycleNs: 1_000_000n, capacity: 1 });
  const checked = new CaptureRing({ axisCount: 1, cycleNs: 1_000_000n, capacity: 1 });
  const s = source(1, c!);
  captureCycle(s, fast, c!.nowNs, c!.lateness, c!.workNs, c!.enabled);
  new Uint8Array(fast.buffer)[128 + REC.io_reason] = 1; // a byte no cycle record writes
  captureCycle(s, fast, c!.nowNs, c!.lateness, c!.workNs, c!.enabled);
  captureCycleChecked(s, checked, c!.nowNs, c!.lateness, c!.workNs, c!.enabled);
  captureCycleChecked(s, checked, c!.nowNs, c!.lateness, c!.workNs, c!.enabled);
  expect(new Uint8Array(fast.buffer)[128 + REC.io_reason]).toBe(1);
  expect(new Uint8Array(checked.buffer)[128 + REC.io_reason]).toBe(0);
});

/**
 * The control block and the slots of the records written so far: what a reader of the ring can see. The
 * word a reused buffer keeps for the next ring (ring.ts W_TOUCHED) is no reader's business and not compared.
 */
function sameVisible(a: CaptureRing, b: CaptureRing): void {
  const end = 128 + Math.min(a.newest, a.capacity) * a.stride;
  expect(b.newest).toBe(a.newest);
  const x = new Uint8Array(a.buffer, 0, end);
  const y = new Uint8Array(b.buffer, 0, end);
  const touched = W_TOUCHED * 4;
  let first = -1;
  for (let k = 0; k < end && first < 0; k++) if (x[k] !== y[k] && (k < touched || k >= touched + 4)) first = k;
  expect(first, `first differing byte ${first}`).toBe(-1);
}

test('a ring written into the buffer of an ended one reads as a fresh ring: new control block, earlier records zeroed first', () => {
  const INC_A = 'a'.repeat(32);
  const INC_B = 'b'.repeat(32);
  fc.assert(
    fc.property(
      fc.array(cycleArb(9), { minLength: 1, maxLength: 8 }),
      fc.integer({ min: 0, max: 7 }),
      fc.boolean(),
      fc.array(cycleArb(9), { minLength: 1, maxLength: 8 }),
      (before, checkedAt, leftOpen, after) => {
        // The earlier incarnation: cycle records with one record through the checked API among them
        // (fields no cycle record writes), perhaps round the ring, perhaps a record left open at its end.
        const earlier = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 5, incarnation: INC_A });
        before.forEach((c, k) => {
          if (k === checkedAt % before.length) earlier.writeRecord({ active_traj_id: 7n, queue_depth: 5 }, [{ collision_trip_count: 3n, ext_valid_mask: 0xffff }]);
          captureCycle(source(9, c), earlier, c.nowNs, c.lateness, c.workNs, c.enabled);
        });
        if (leftOpen) earlier.beginRecord().u64(REC.active_traj_id, 9n);
        const reused = new CaptureRing({ axisCount: 9, cycleNs: 2_000_000n, capacity: 5, incarnation: INC_B, reuse: earlier.buffer });
        const fresh = new CaptureRing({ axisCount: 9, cycleNs: 2_000_000n, capacity: 5, incarnation: INC_B });
        expect(reused.buffer).toBe(earlier.buffer);
        sameVisible(fresh, reused); // the control block alone: no record yet
        for (const c of after) {
          const s = source(9, c);
          captureCycle(s, reused, c.nowNs, c.lateness, c.workNs, c.enabled);
          captureCycle(s, fresh, c.nowNs, c.lateness, c.workNs, c.enabled);
          sameVisible(fresh, reused);
        }
      },
    ),
    { numRuns: 150 },
  );
});

test('a buffer of another ring layout is not reused', () => {
  const other = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 4 });
  expect(new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 5, reuse: other.buffer }).buffer).not.toBe(other.buffer);
  expect(new CaptureRing({ axisCount: 8, cycleNs: 1_000_000n, capacity: 4, reuse: other.buffer }).buffer).not.toBe(other.buffer);
  expect(new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 4, reuse: new SharedArrayBuffer(other.buffer.byteLength) }).capacity).toBe(4);
});

/** Trajectory and jog state as the lanes may hold it mid-motion (fields record.ts reads), and the core's motion scalars. */
const motionArb = (n: number) =>
  fc.record({
    traj: fc.option(fc.record({ handle: u64, axisMask: mask, commandSequence: u64, index: int(32, false), velocity: fc.array(fc.double({ min: -3e9, max: 3e9, noNaN: true }), { minLength: n, maxLength: n }) }), { nil: null }),
    jog: fc.record({
      generation: fc.oneof(fc.constant(0n), u64),
      inputDeadlineNs: u64,
      sourceSequence: u64,
      open: fc.boolean(),
      hasInput: fc.boolean(),
      axisMask: mask,
      ramping: fc.boolean(),
      active: fc.boolean(),
      laneAxes: mask,
      velocity: fc.array(fc.oneof(fc.double({ min: -3e9, max: 3e9, noNaN: true }), fc.constantFrom(0.5, -0.5, 1.5, -2.5)), { minLength: n, maxLength: n }),
    }),
    motionState: int(32, false),
    prepared: fc.boolean(),
    lastEvent: int(32, false),
  });

function moving(n: number, c: Cycle, m: ReturnType<typeof motionArb> extends fc.Arbitrary<infer T> ? T : never): CaptureSource {
  const base = source(n, c);
  const t = m.traj;
  const trajectory = { active: t !== null, plan: t && { handle: t.handle, axisMask: t.axisMask }, commandSequence: t?.commandSequence ?? 0n, index: t?.index ?? 0, targetVelocity: Float64Array.from(t?.velocity ?? Array<number>(n).fill(0)) };
  const jog = { ...m.jog, velocity: Float64Array.from(m.jog.velocity) };
  const lanes = { axesOf: (lane: unknown) => (lane === jog ? m.jog.laneAxes : 0) };
  return {
    ...base,
    trajectory: trajectory as unknown as TrajectoryLane,
    jog: jog as unknown as JogLane,
    lanes: lanes as unknown as LaneArbiter,
    motionState: m.motionState,
    preparedPlan: m.prepared ? ({} as CaptureSource['preparedPlan']) : null,
    lastEvent: m.lastEvent,
  };
}

for (const n of [1, 9]) {
  test(`with a trajectory or a jog running, the unchecked cycle record is byte-identical to the checked one (${n} axes)`, () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(cycleArb(n), motionArb(n)), { minLength: 1, maxLength: 10 }), (cycles) => {
        const fast = new CaptureRing({ axisCount: n, cycleNs: 1_000_000n, capacity: 3 });
        const checked = new CaptureRing({ axisCount: n, cycleNs: 1_000_000n, capacity: 3 });
        for (const [c, m] of cycles) {
          const s = moving(n, c, m);
          captureCycle(s, fast, c.nowNs, c.lateness, c.workNs, c.enabled);
          captureCycleChecked(s, checked, c.nowNs, c.lateness, c.workNs, c.enabled);
          same(fast, checked);
        }
      }),
      { numRuns: 300 },
    );
  });
}

test('a buffer reused twice: the slots the first ring wrote past the second ring\'s records are still zeroed before the third writes them', () => {
  const INC = 'c'.repeat(32);
  const cycles = fc.sample(cycleArb(9), { numRuns: 6, seed: 11 });
  const first = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 8 });
  for (const c of cycles.slice(0, 3)) captureCycle(source(9, c), first, c.nowNs, c.lateness, c.workNs, c.enabled);
  // Slot 3 holds a record with fields no cycle record writes.
  first.writeRecord({ active_traj_id: 7n }, [{ collision_trip_count: 3n, ext_valid_mask: 0xffff }]);
  const second = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 8, reuse: first.buffer });
  captureCycle(source(9, cycles[0]!), second, 1n, 0, 0, 0); // one record: its newest is 1
  const third = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 8, incarnation: INC, reuse: first.buffer });
  const fresh = new CaptureRing({ axisCount: 9, cycleNs: 1_000_000n, capacity: 8, incarnation: INC });
  expect(third.buffer).toBe(first.buffer);
  for (const c of cycles) {
    captureCycle(source(9, c), third, c.nowNs, c.lateness, c.workNs, c.enabled);
    captureCycle(source(9, c), fresh, c.nowNs, c.lateness, c.workNs, c.enabled);
    sameVisible(fresh, third);
  }
});
