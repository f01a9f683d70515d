// Decodes and admits program files off the service's main loop (document 1 part 4 prepare_program: the
// upload must not stall observations; part 3: a renewal sent within its lease must be answered, also while
// a maximum program is admitted). Kept warm between uploads (starting a worker compiles the codec again,
// seconds of CPU on a loaded host). Receives an AdmitJob (sims/service/programs.ts; the file's bytes
// transferred) and does every step between the body read and the core's prepare: the file decoded
// (codec.ts), the live-machine checks (programs.ts admitProgram) and the plan arrays the core takes
// (programs.ts programPlan), written into the plan arena slot the service claimed when the plan belongs
// there. Answers an AdmitAnswer: the admitted program without its points, and its plan arrays transferred
// unless they were written into the slot; or the refusal's reason and text.

import { parentPort } from 'node:worker_threads';
import { DenseFormatError, decode, readMarkers } from './codec.ts';
import { PLAN_ARENA_MIN_BYTES, PlanArena } from '../core/plan-arena.ts';
import { ProgramRefusal, admitProgram, programPlan, type AdmitAnswer, type AdmitJob } from '../service/programs.ts';
import { lowerThreadPriority } from '../thread-priority.ts';

// Behind the main loop and the core in the scheduler's queue (sims/thread-priority.ts).
lowerThreadPriority();

/** Arenas attached so far, by buffer (one per core incarnation). */
const arenas = new WeakMap<SharedArrayBuffer, PlanArena>();

parentPort!.on('message', (m: AdmitJob) => {
  try {
    parentPort!.postMessage(...admit(m));
  } catch (e) {
    const answer: AdmitAnswer =
      e instanceof DenseFormatError ? { id: m.id, reason: e.reason, message: e.message }
      : e instanceof ProgramRefusal ? { id: m.id, refusal: { reason: e.reason, text: e.text, ...(e.limitViolation ? { limitViolation: e.limitViolation } : {}) } }
      : { id: m.id, defect: (e as Error).message };
    parentPort!.postMessage(answer);
  }
});

function admit(m: AdmitJob): [AdmitAnswer, ArrayBuffer[]] {
  const x = decode(m.bytes, { maxHeaderBytes: m.maxHeaderBytes });
  const p = admitProgram(x, m.axes, m.manifestRevision, m.outputs, readMarkers(x.processMarkers) ?? []);
  const { points, ...rest } = p;
  const count = points.segment.length;
  const N = m.axes.length;
  const admitted = { ...rest, count, segment: points.segment };
  // A large plan goes into the slot (sims/core/plan-arena.ts: no transferred memory for the core to collect).
  let arena = m.arena ? arenas.get(m.arena.buffer) : undefined;
  if (m.arena && !arena) arenas.set(m.arena.buffer, (arena = PlanArena.attach(m.arena.buffer)));
  if (arena && m.arena && count * N * 8 >= PLAN_ARENA_MIN_BYTES && count <= arena.maxPoints) {
    programPlan(p, N, { plan: arena.plan(m.arena.slot, count, true), workspace: arena.workspace(m.arena.slot, count) });
    return [{ id: m.id, admitted, inSlot: true }, [points.segment.buffer as ArrayBuffer]];
  }
  const plan = programPlan(p, N);
  const w = plan.workspace;
  const transfer = [points.segment.buffer, plan.timeNs.buffer, plan.position.buffer, plan.velocity.buffer, plan.hasVelocity.buffer, plan.ioMask.buffer, plan.ioValues.buffer, w.t.buffer, w.q.buffer, w.qd.buffer] as ArrayBuffer[];
  return [{ id: m.id, admitted, inSlot: false, plan }, transfer];
}
