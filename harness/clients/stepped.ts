// What a client of a stack on the stepped clock does over and over: step the core until an operation's
// reply comes (the core answers in a cycle, and a Home or an arm takes many), and bring the cell to a held
// grant with J1 homed and every axis enabled and armed. The cycles run only when asked (target.step, the
// private test channel), so these never wait on the wall clock.

import type { Cell, Pace, Session } from './cell.ts';
import type { ControlClient } from './control.ts';
import { readStatus, waitStatus } from './status.ts';
import { pollEvents, waitForEvent, type CellEvent } from './events.ts';
import { HarnessError } from '../errors.ts';
import type { Target } from '../targets/types.ts';
import { machineOf } from '../machine.ts';

function stepper(target: Target): (cycles: number) => Promise<bigint> {
  if (!target.step) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', `target ${target.name} has no stepped clock`);
  return (n) => target.step!(n);
}

/** How long a client waits for a reply the core has already answered to come through the service (wall ms). */
const PASS_ON_MS = 2_000;
/**
 * How long a client waits for a request the core owes nothing for (answered by the service alone or by the
 * core on receipt, or not at the core yet: its body still being read) before it steps on all the same (wall ms).
 */
const UNSEEN_MS = 10_000;
/** How often the client asks what the core owes meanwhile (wall ms; no cycle runs). */
const LOOK_MS = 2;

/**
 * Step the core `chunk` cycles at a time until `p` settles (at most 1000 chunks); its outcome.
 *
 * Deterministic in the number of steps, which a recording replayed step by step needs (docs/recording.md
 * "The stepped clock"): stepping on until the reply happens to arrive would step more or fewer times
 * depending on how fast the service passed the core's answer on, or answered by itself. So after each step:
 * - when its cycles produced an answer (the step reports it), the reply may be that one: wait for it
 *   (bounded) before stepping on;
 * - when the core owes no answer after the step (StepReport.waiting 0: no receipt outstanding, no Home under
 *   way), the request is answered without cycles (by the service alone: a refusal at the fence, a release;
 *   or by the core on receipt, which it gives between steps) or has not reached the core yet: wait until it
 *   settles or the core owes an answer (bounded), and only then step on. Without this, a cleanup whose
 *   release and stop the service refused by itself stepped as many times as two round trips to the service
 *   took (suites/trajectory/intents.test.ts, 2 of 4 replays one step short). What the core owes is the
 *   core's own figure, which a replay gives at the same place (sims/core/host.ts CoreHost.owed): the
 *   service's own count of its waits on the core was not (a begin_jog the replay held after a step was
 *   already waited for, and the replay stepped once more than recorded: suites/jog/generations.test.ts).
 * The first step goes out with the request, as before.
 */
export async function settle<T>(target: Target, p: Promise<T>, chunk = 10): Promise<T> {
  await stepUntilSettled(target, p, chunk);
  return p;
}

/** `settle` without waiting for `p` in the end: whether it settled within `max` chunks. */
export async function stepUntilSettled(target: Target, p: Promise<unknown>, chunk: number, max = 1000): Promise<boolean> {
  if (!target.stepReport) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', `target ${target.name} has no stepped clock`);
  const w = watch(p);
  for (let i = 0; i < max && !w.done(); i++) {
    const r = await target.stepReport(chunk);
    if (w.done()) break;
    if (r.answered > 0) await w.within(PASS_ON_MS);
    else if (r.waiting === 0 && target.coreWaits) {
      const until = Date.now() + UNSEEN_MS;
      while (!w.done() && Date.now() < until && (await target.coreWaits()) === 0 && !w.done()) await w.within(LOOK_MS);
    }
  }
  return w.done();
}

/** Whether `p` has settled (either way), and a wait for it of at most `ms` wall milliseconds. */
function watch(p: Promise<unknown>): { done: () => boolean; within: (ms: number) => Promise<unknown> } {
  let done = false;
  const settled = p.then(
    () => (done = true),
    () => (done = true),
  );
  return { done: () => done, within: (ms) => Promise.race([settled, new Promise((res) => setTimeout(res, ms).unref())]) };
}

/**
 * readyDriven on a target whose stack runs on the stepped clock (a stepped variant, say), which the caller
 * holds without a CellDriver of its own.
 */
export async function readyStepped(
  target: Target,
  cell: Cell,
  client: ControlClient,
  o: { axes: number; homeMask?: number; leaseMs?: number },
): Promise<{ s: Session; hold: number[] }> {
  const d = (await client.describe()).reply.data as { [k: string]: unknown };
  const drive = driverOf(target, client, d);
  if (!drive.stepped) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', `target ${target.name}'s stack does not run on the stepped clock (Describe clock ${String(d.clock)})`);
  return readyDriven(cell, drive, o);
}

/**
 * A held grant (renewed in host time), the axes of `homeMask` homed when they have no Home evidence (by
 * default the first axis, when it needs Home for a Start and has a native Home to get it: harness/machine.ts
 * homeFor), every axis enabled and armed, observed in status; the positions then held. Through a CellDriver
 * (driverOf), so the same steps run on either clock. Throws a HarnessError naming the step that was refused
 * (a target that refuses these cannot run the test that asked).
 */
export async function readyDriven(cell: Cell, drive: CellDriver, o: { axes: number; homeMask?: number; leaseMs?: number }): Promise<{ s: Session; hold: number[] }> {
  const st0 = await drive.status((st) => st.core !== null, 1_000); // the core's first status publications
  const s = await cell.hold({ requested_lease_ms: BigInt(o.leaseMs ?? 10_000) });
  const must = (what: string, r: { status: number; reply: { error?: string } }) => {
    if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `${what} refused: ${r.status} ${r.reply.error ?? ''}`, { detail: { status: r.status } });
  };
  const home = o.homeMask ?? (await firstAxisHome(cell.client, st0.core!.home_valid_mask));
  if (home && (Number(st0.core!.home_valid_mask) & home) !== home) must('home', await drive.answerWithin(cell.fenced('home', s, { axis_mask: home }), 60_000));
  const all = o.axes >= 32 ? 0xffffffff : (1 << o.axes) - 1;
  must('enable', await drive.answer(cell.fenced('enable', s, { axis_mask: all }), 5));
  await drive.status((st) => Number(st.core!.axis_enable_mask) === all, 3_000);
  must('arm', await drive.answer(cell.fenced('arm', s), 5));
  const x = await drive.status((st) => st.core!.armed === 1n && Number(st.core!.axis_enable_mask) === all, 3_000);
  if (x.core!.armed !== 1n || Number(x.core!.axis_enable_mask) !== all) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `arm answered 200, but status shows armed ${x.core!.armed} and axis_enable_mask ${x.core!.axis_enable_mask}, not 1 and ${all}`);
  return { s, hold: x.axes.map((a) => Number(a.position)) };
}

async function firstAxisHome(client: ControlClient, valid: bigint | number): Promise<number> {
  const m = machineOf((await client.describe()).reply.data as object);
  const a = m.axes[0];
  return a ? m.homeFor(a, valid) : 0;
}

/**
 * How a test moves a cell along, whichever clock the cell runs on: one test body for a stepped stack (the
 * sim target's file stack where its file declared stepsItsCell, harness/fixture.ts) and a real-time one
 * (an external service, a rig). On the stepped clock the core cycles only when stepped, so the outcome
 * does not depend on how loaded the host is; on a real-time cell the same calls wait (Pace, cell.ts).
 */
export interface CellDriver extends Pace {
  /** Whether the cell runs on the stepped clock (its Describe says `clock: stepped` and the target can step it). */
  readonly stepped: boolean;
  /**
   * The first event after `after` that `pred` holds for, or undefined once `ms` milliseconds passed without
   * one: of cell time on the stepped clock (stepped as `status` steps, the event log read between steps), of
   * wall time otherwise (waitForEvent). An event stays in the log once emitted, so none is missed between
   * two reads.
   */
  event(after: bigint, pred: (e: CellEvent) => boolean, ms: number): Promise<CellEvent | undefined>;
  /** Let `ms` milliseconds pass: of cell time on the stepped clock (that many cycles, rounded up), of wall time otherwise. */
  elapse(ms: number): Promise<void>;
}

export function driverOf(target: Target, client: ControlClient, description: { [k: string]: unknown }): CellDriver {
  const cycleNs = Number(description.cycle_ns ?? 1_000_000);
  if (description.clock !== 'stepped' || !target.stepReport || !(cycleNs > 0)) {
    return {
      stepped: false,
      answer: (p) => p,
      answerWithin: (p) => p,
      status: (pred, ms) => waitStatus(client, pred, ms),
      event: (after, pred, ms) => waitForEvent(client, after, pred, ms),
      elapse: (ms) => new Promise((res) => setTimeout(res, ms)),
    };
  }
  const step = stepper(target);
  const cycles = (ms: number) => Math.ceil((ms * 1e6) / cycleNs);
  // A fiftieth of the budget between reads, 10 to 100 ms of cell time: a wait of seconds (a program
  // running to completion) reads status tens of times, not hundreds. The predicate is a condition that
  // holds once reached (a state, a mask), so it is met at most one chunk late.
  const chunkOf = (ms: number) => Math.max(1, Math.round((Math.min(100, Math.max(10, ms / 50)) * 1e6) / cycleNs));
  return {
    stepped: true,
    answer: (p, n = 10) => settle(target, p, n),
    async status(pred, ms) {
      const budget = cycles(ms);
      const chunk = chunkOf(ms);
      for (let stepped = 0; ; stepped += chunk) {
        const s = await readStatus(client);
        if (pred(s) || stepped >= budget) return s;
        await step(chunk);
      }
    },
    async answerWithin(p, ms) {
      const budget = cycles(ms);
      const chunk = chunkOf(ms);
      const w = watch(p);
      for (let stepped = 0; !w.done() && stepped < budget; stepped += chunk) {
        // A step that produced an answer (its report says so: a Home's outcome) is waited on for the reply,
        // bounded, as `answer` waits: stepping on after LOOK_MS stepped once more on a loaded host than its
        // recording had, and the replay diverged. A step that produced none steps on after a short look: the
        // reply may come from a newer observation the service waits for (reset_fault), with no answer of the
        // core's.
        const r = await target.stepReport!(chunk);
        if (!w.done()) await w.within(r.answered > 0 ? PASS_ON_MS : LOOK_MS);
      }
      return p;
    },
    async event(after, pred, ms) {
      const budget = cycles(ms);
      const chunk = chunkOf(ms);
      // The core sends the events of a step's cycles before the step's answer, so the log read after a step
      // holds them.
      for (let stepped = 0, cursor = after; ; stepped += chunk) {
        const b = await pollEvents(client, cursor);
        const hit = b.events.find(pred);
        if (hit) return hit;
        if (b.events.length) cursor = b.next_sequence;
        if (stepped >= budget) return undefined;
        await step(chunk);
      }
    },
    async elapse(ms) {
      await step(cycles(ms));
    },
  };
}
