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

import { Worker } from 'node:worker_threads';
import { workerEntry } from '../paths.ts';

/** The intake worker's heap ceiling: a container the limits admit reads in far less. */
const HEAP_MB = 1024;

export type IntakeVerdict = { failed: string } | { failed?: undefined };

export class Intake {
  private w: Worker | undefined;
  private next = 1;
  private readonly pending = new Map<number, (v: IntakeVerdict) => void>();

  private worker(): Worker {
    if (this.w) return this.w;
    const w = new Worker(workerEntry('planner-intake'), { resourceLimits: { maxOldGenerationSizeMb: HEAP_MB } });
    w.unref();
    w.on('message', (m: { id: number; failed?: string; defect?: string }) => {
      const done = this.pending.get(m.id);
      if (!done) return;
      this.pending.delete(m.id);
      done(m.failed !== undefined ? { failed: m.failed } : {});
    });
    const gone = () => {
      if (this.w === w) this.w = undefined;
      for (const done of this.pending.values()) done({});
      this.pending.clear();
    };
    w.on('error', gone);
    w.on('exit', gone);
    this.w = w;
    return w;
  }

  /** The planning failure an unreadable container gives, or no verdict (let the planning process read it). */
  check(bytes: Uint8Array): Promise<IntakeVerdict> {
    const w = this.worker();
    const id = this.next++;
    const copy = new Uint8Array(bytes.length);
    copy.set(bytes);
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      w.postMessage({ id, bytes: copy }, [copy.buffer]);
    });
  }

  async close(): Promise<void> {
    const w = this.w;
    this.w = undefined;
    if (w) await w.terminate();
  }
}
