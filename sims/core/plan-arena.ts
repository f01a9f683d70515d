// Plan memory the core adopts once (docs/architecture.md "Keeping the cycle while
// the service works"). A maximum upload used to reach the core as ~80 MB of transferred ArrayBuffers:
// every isolate that adopted them (the service's main thread, then the core's) counted them as new
// external memory, and V8 collects when an isolate's external memory grows by tens of MB: one collection
// of 0.75 to 1.1 ms in the core's cycle per upload, and mark-compacts of up to 12 ms on the service's loop.
//
// The arena is one SharedArrayBuffer per core incarnation, made by the core at start and announced in
// 'ready'. A SharedArrayBuffer's memory is not counted as any isolate's external memory (V8 gives shared
// backing stores no per-isolate accounting), so views of it travel between the threads in messages
// without costing a collection anywhere. The upload worker decodes straight into a slot, the service checks
// the points in place, and the prepare carries views of the slot plus its number (protocol.ts PlanAttachment
// `slot`); the core builds the plan in the same slot (its PlanWorkspace part) and gives the slot back when
// the plan is gone (refused, superseded, discarded, consumed, completed, retired).
//
// Slots are fixed: each holds one plan of the documented maximum (document 1 part 8: 250000 points) for the
// machine's axes, every array the core's plan needs (protocol.ts PlanArrays and PlanWorkspace). Memory:
// the buffer is reserved, not committed (the kernel maps a page when it is first written), so a slot costs
// resident memory only for the points written into it; a maximum nine-axis plan is 78.5 MB of which today's
// path touched the same bytes (decoder arrays and workspace) for each upload. What changes is that the
// pages stay mapped for the incarnation once written, instead of going back when collected: at most
// PLAN_ARENA_SLOTS maximum plans, the high-water mark of today's path with two plans alive. Two slots are
// what a cell uses in sequence (one plan executing or prepared, the next one uploading); a third plan alive
// at once (a program upload beside a trajectory upload while another plan waits in the core) takes
// today's path (transferred arrays), as does any plan when the arena is absent (a paced replay: the
// recorded messages carry arrays) or of another incarnation (a core restart during an upload).
//
// Ownership is one Int32 state word per slot, changed with Atomics: free -> held (the service claims it for
// an upload or a program) -> core (the core received the prepare carrying it) -> free (the core let the plan
// go), or held -> free when the service never sends it (a refused or abandoned upload).

import type { PlanArrays, PlanWorkspace } from './protocol.ts';

/** Most points a plan may carry (document 1 part 8; the service's decoder refuses more). */
export const PLAN_MAX_POINTS = 250_000;
/** Slots of an arena: the plan executing or prepared, and the next one (see the file header). */
export const PLAN_ARENA_SLOTS = 2;

/**
 * Plans smaller than this (bytes of a body declared, or of positions) stay on arrays of their own: a few
 * thousand points cost no collection when transferred, and would only keep a slot from the large plans the
 * arena is for.
 */
export const PLAN_ARENA_MIN_BYTES = 1024 * 1024;

const FREE = 0;
const HELD = 1;
const CORE = 2;

const MAGIC = 0x504c4e41; // "PLNA"
/** Header words: magic, axes, max points, slots, then per slot its state and the points faulted in so far. */
const HEAD = 4;
const PER_SLOT = 2;

const align8 = (n: number) => Math.ceil(n / 8) * 8;

/** Byte offsets of one slot's arrays from the slot's start, for `points` points of `axes` axes. */
function slotLayout(points: number, axes: number) {
  let at = 0;
  const take = (bytes: number) => {
    const o = at;
    at += align8(bytes);
    return o;
  };
  const row = points * axes * 8;
  const offsets = {
    timeNs: take(points * 8),
    position: take(row),
    velocity: take(row),
    t: take(points * 8),
    q: take(row),
    qd: take(row),
    ioMask: take(points * 4),
    ioValues: take(points * 4),
    hasVelocity: take(points),
    ioFlags: take(points),
  };
  return { offsets, bytes: at };
}

/** A slot's arrays at full capacity: what the upload decoder writes into (sims/service/upload/decoder.ts). */
export type SlotStorage = PlanArrays & { ioFlags: Uint8Array };

export class PlanArena {
  readonly axes: number;
  readonly maxPoints: number;
  readonly slots: number;
  private readonly words: Int32Array;
  private readonly base: number;
  private readonly slotBytes: number;
  private readonly layout: ReturnType<typeof slotLayout>['offsets'];

  private constructor(readonly buffer: SharedArrayBuffer) {
    const head = new Int32Array(buffer, 0, HEAD);
    if (head[0] !== MAGIC) throw new RangeError('not a plan arena');
    this.axes = head[1]!;
    this.maxPoints = head[2]!;
    this.slots = head[3]!;
    this.words = new Int32Array(buffer, 0, HEAD + this.slots * PER_SLOT);
    this.base = align8(this.words.byteLength);
    const l = slotLayout(this.maxPoints, this.axes);
    this.layout = l.offsets;
    this.slotBytes = l.bytes;
  }

  /** A new arena (the core, at start): every slot free, nothing faulted in. */
  static create(axes: number, o: { slots?: number; maxPoints?: number } = {}): PlanArena {
    const slots = o.slots ?? PLAN_ARENA_SLOTS;
    const maxPoints = o.maxPoints ?? PLAN_MAX_POINTS;
    if (!Number.isInteger(axes) || axes < 1 || !Number.isInteger(slots) || slots < 1 || !Number.isInteger(maxPoints) || maxPoints < 1) {
      throw new RangeError('a plan arena needs whole positive axes, slots and points');
    }
    const base = align8((HEAD + slots * PER_SLOT) * 4);
    const buffer = new SharedArrayBuffer(base + slots * slotLayout(maxPoints, axes).bytes);
    const head = new Int32Array(buffer, 0, HEAD);
    head.set([MAGIC, axes, maxPoints, slots]);
    return new PlanArena(buffer);
  }

  /** The arena another thread made (the buffer from 'ready', or handed to the upload worker). */
  static attach(buffer: SharedArrayBuffer): PlanArena {
    return new PlanArena(buffer);
  }

  /** The service: a free slot for one plan, or -1 when every slot is in use (take today's path then). */
  claim(): number {
    for (let i = 0; i < this.slots; i++) if (Atomics.compareExchange(this.words, HEAD + i * PER_SLOT, FREE, HELD) === FREE) return i;
    return -1;
  }

  /** The service: give back a slot it claimed and never sent to the core (no-op once the core has it). */
  release(slot: number): void {
    Atomics.compareExchange(this.words, HEAD + slot * PER_SLOT, HELD, FREE);
  }

  /** The core: a prepare carrying this slot arrived; the slot is the core's until it lets the plan go. */
  adopt(slot: number): void {
    if (slot >= 0 && slot < this.slots) Atomics.store(this.words, HEAD + slot * PER_SLOT, CORE);
  }

  /**
   * The core: free every slot it holds that none of `a`, `b`, `c` names (the plans it still keeps: being
   * built, prepared, executing). Three arguments, not a list: it runs every cycle, and a cycle allocates
   * nothing (bench/README.md, simspeed: capture and the cycle leave no garbage).
   */
  keep(a: number | undefined, b: number | undefined, c: number | undefined): void {
    for (let i = 0; i < this.slots; i++) {
      const w = HEAD + i * PER_SLOT;
      if (i !== a && i !== b && i !== c && Atomics.load(this.words, w) === CORE) Atomics.store(this.words, w, FREE);
    }
  }

  /** Slots free now (tests, status of the arena). */
  get free(): number {
    let n = 0;
    for (let i = 0; i < this.slots; i++) if (Atomics.load(this.words, HEAD + i * PER_SLOT) === FREE) n++;
    return n;
  }

  /** The state of a slot: 'free', 'held' (the service's) or 'core'. */
  state(slot: number): 'free' | 'held' | 'core' {
    const s = Atomics.load(this.words, HEAD + slot * PER_SLOT);
    return s === FREE ? 'free' : s === HELD ? 'held' : 'core';
  }

  /** A slot's arrays at full capacity (maxPoints points). Their contents are whatever the slot held last. */
  storage(slot: number): SlotStorage {
    const b = this.buffer;
    const o = this.at(slot);
    const L = this.layout;
    const P = this.maxPoints;
    const PN = P * this.axes;
    return {
      timeNs: new BigInt64Array(b, o + L.timeNs, P),
      position: new Float64Array(b, o + L.position, PN),
      velocity: new Float64Array(b, o + L.velocity, PN),
      hasVelocity: new Uint8Array(b, o + L.hasVelocity, P),
      ioMask: new Uint32Array(b, o + L.ioMask, P),
      ioValues: new Uint32Array(b, o + L.ioValues, P),
      ioFlags: new Uint8Array(b, o + L.ioFlags, P),
    };
  }

  /**
   * The memory the core builds a plan of `count` points in (protocol.ts PlanWorkspace), its pages written
   * here the first time a slot reaches that many points, so they are faulted in on the calling thread, not
   * on the core's (first-touch faults in the cycle made every slice of a build late: PlanWorkspace).
   */
  workspace(slot: number, count: number): PlanWorkspace {
    if (count > this.maxPoints) throw new RangeError(`a plan of ${count} points does not fit a slot of ${this.maxPoints}`);
    const b = this.buffer;
    const o = this.at(slot);
    const L = this.layout;
    const N = this.axes;
    const w: PlanWorkspace = { t: new Float64Array(b, o + L.t, count), q: new Float64Array(b, o + L.q, count * N), qd: new Float64Array(b, o + L.qd, count * N) };
    const mark = HEAD + slot * PER_SLOT + 1;
    const done = Atomics.load(this.words, mark);
    if (count > done) {
      w.t.fill(0, done);
      w.q.fill(0, done * N);
      w.qd.fill(0, done * N);
      Atomics.store(this.words, mark, count);
    }
    return w;
  }

  /** The first `count` points of a slot as the plan's arrays; `velocity` false: none carried (PlanArrays). */
  plan(slot: number, count: number, velocity: boolean): SlotStorage {
    if (count > this.maxPoints) throw new RangeError(`a plan of ${count} points does not fit a slot of ${this.maxPoints}`);
    const s = this.storage(slot);
    const N = this.axes;
    return {
      timeNs: s.timeNs.subarray(0, count),
      position: s.position.subarray(0, count * N),
      velocity: velocity ? s.velocity.subarray(0, count * N) : new Float64Array(0),
      hasVelocity: s.hasVelocity.subarray(0, count),
      ioMask: s.ioMask.subarray(0, count),
      ioValues: s.ioValues.subarray(0, count),
      ioFlags: s.ioFlags.subarray(0, count),
    };
  }

  private at(slot: number): number {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots) throw new RangeError(`no slot ${slot} in a plan arena of ${this.slots}`);
    return this.base + slot * this.slotBytes;
  }
}

/**
 * A slot the service holds for one plan: released if the plan never reaches the core (a refusal, a
 * disconnect), handed over when the prepare carrying it is posted (sims/service/core-link.ts prepare).
 */
export class PlanLease {
  private done = false;
  constructor(
    readonly arena: PlanArena,
    readonly slot: number,
  ) {}

  /** The prepare carrying this slot was posted: the core gives it back from now on. */
  handOver(): void {
    this.done = true;
  }

  /** The plan will not reach the core: the slot is free again. Idempotent; nothing after handOver. */
  release(): void {
    if (this.done) return;
    this.done = true;
    this.arena.release(this.slot);
  }
}
