// Reads a weldplan container off the planner's main loop (sims/planner/intake.ts says why it is read
// before a planning process starts). Receives {id, bytes}; answers {id} when the container reads, {id,
// failed: text} with the planning failure's text when it does not, {id, defect} on anything else (the
// planning process then meets the same input and answers for it).

import { parentPort } from 'node:worker_threads';
import { PlanningFailure, readWeldplan } from './weldplan.ts';
import { lowerThreadPriority } from '../thread-priority.ts';

// Behind the main loop and the core in the scheduler's queue (sims/thread-priority.ts).
lowerThreadPriority();

parentPort!.on('message', (m: { id: number; bytes: Uint8Array }) => {
  try {
    readWeldplan(m.bytes);
    parentPort!.postMessage({ id: m.id });
  } catch (e) {
    if (e instanceof PlanningFailure) parentPort!.postMessage({ id: m.id, failed: e.text });
    else parentPort!.postMessage({ id: m.id, defect: (e as Error).message });
  }
});
