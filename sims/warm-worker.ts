// One worker thread kept warm between jobs, answering each job by its id: the dense program decoder
// (sims/service/program-route.ts) and the planner's container intake (sims/planner/intake.ts). Starting a
// worker compiles its code again (tens of ms, seconds on a loaded host), so it is started at the first job
// and kept; a worker that fails or exits settles every job it held through `lost` and is replaced at the
// next job. The worker answers `{id, ...}`; the bytes of a job are copied into a buffer of their own and
// transferred, so the caller keeps its body.

import { Worker, type ResourceLimits } from 'node:worker_threads';

export class WarmWorker<Answer extends { id: number }> {
  private w: Worker | undefined;
  private next = 1;
  private readonly pending = new Map<number, { done: (a: Answer) => void; lost: (e: Error) => void }>();

  constructor(
    private readonly entry: URL,
    private readonly name: string,
    private readonly resourceLimits?: ResourceLimits,
  ) {}

  private worker(): Worker {
    if (this.w) return this.w;
    const w = new Worker(this.entry, this.resourceLimits ? { resourceLimits: this.resourceLimits } : {});
    w.on('message', (m: Answer) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      p.done(m);
    });
    const gone = (e: Error) => {
      if (this.w === w) this.w = undefined;
      for (const p of this.pending.values()) p.lost(e);
      this.pending.clear();
    };
    w.on('error', gone);
    w.on('exit', (code) => gone(new Error(`${this.name} worker exited with ${code}`)));
    // Unreferenced after its listeners are on: a 'message' listener added later references the worker's
    // port again, and a kept worker would then hold the process open and count, in a stack host
    // (sims/sessions.ts), as a resource the session that started it left running.
    w.unref();
    this.w = w;
    return w;
  }

  /**
   * Post `{id, bytes, ...fields}` (bytes copied and transferred); resolves with the worker's answer, rejects
   * when the worker is lost. `transfer`: the caller gives its bytes up, so when they span a buffer of their
   * own that buffer moves to the worker as it is (no copy of a 39 MB body on the caller's thread).
   */
  ask(bytes: Uint8Array, fields: Record<string, unknown> = {}, o: { transfer?: boolean } = {}): Promise<Answer> {
    const w = this.worker();
    const id = this.next++;
    const whole = o.transfer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer;
    const copy = whole ? bytes : new Uint8Array(bytes.length);
    if (!whole) copy.set(bytes);
    return new Promise((done, lost) => {
      this.pending.set(id, { done, lost });
      w.postMessage({ ...fields, id, bytes: copy }, [copy.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    const w = this.w;
    this.w = undefined;
    if (w) await w.terminate();
  }
}
