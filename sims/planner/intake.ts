// The container's intake check, before a planning process is started for it.
//
// Document 2 part 1: "each admitted request runs in a fresh process"; part 7 lists an unreadable container
// (bad zip, digest mismatch, wrong program schema) among the 422 "planning failed" answers without saying
// where it is found. Reading the container is bounded work (the entry and size limits of weldplan.ts are
// judged before anything is inflated) and says nothing about the GPU: the service reads it first, when the
// request's turn comes, in a worker thread kept warm (never on its own loop, which answers health and
// progress meanwhile), and answers an unreadable one 422 with the same `<type>: <message>` text the
// planning process would give, without starting one. A container that reads goes to a fresh planning
// process as before, which reads it again for itself. docs/profile.md "Weld planner: planning processes".
//
// A defect of the reader (anything but a PlanningFailure), or a worker that dies (its heap is capped), is
// no answer: the request goes to a planning process, which meets the same input in isolation and answers
// for it as it always has.

import { workerEntry } from '../paths.ts';
import { WarmWorker } from '../warm-worker.ts';

/** The intake worker's heap ceiling: a container the limits admit reads in far less. */
const HEAP_MB = 1024;

export type IntakeVerdict = { failed: string } | { failed?: undefined };

export class Intake {
  private readonly w = new WarmWorker<{ id: number; failed?: string; defect?: string }>(workerEntry('planner-intake'), 'planner intake', { maxOldGenerationSizeMb: HEAP_MB });

  /** The planning failure an unreadable container gives, or no verdict (let the planning process read it). */
  async check(bytes: Uint8Array): Promise<IntakeVerdict> {
    try {
      const m = await this.w.ask(bytes);
      return m.failed !== undefined ? { failed: m.failed } : {};
    } catch {
      return {}; // the worker died (its heap is capped): no verdict
    }
  }

  close(): Promise<void> {
    return this.w.close();
  }
}
