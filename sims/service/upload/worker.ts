// The upload decode worker: runs TrajectoryDecoder off the service's main event loop, so status, events
// and telemetry keep answering during a 222 MB upload (document 1 part 8). One warm worker serves every
// upload; each upload is a session keyed by id. Chunks arrive transferred; the typed arrays of the result
// are transferred back, or, for an upload given a plan arena slot (sims/core/plan-arena.ts), decoded into
// the slot and sent back as views of it (nothing transferred, no external memory for any isolate to adopt).

import { parentPort } from 'node:worker_threads';
import { pointsArraysDigest, TrajectoryDecoder, UploadRefusal, type PointArrays } from './decoder.ts';
import type { FromWorker, ToWorker } from './protocol.ts';
import type { PlanWorkspace } from '../../core/protocol.ts';
import { PlanArena } from '../../core/plan-arena.ts';
import { lowerThreadPriority } from '../../thread-priority.ts';

// Behind the main loop and the core in the scheduler's queue (sims/thread-priority.ts).
lowerThreadPriority();

const port = parentPort!;
const sessions = new Map<number, TrajectoryDecoder>();
/** The arena slot a session decodes into. */
const slots = new Map<number, { arena: PlanArena; slot: number }>();
const send = (m: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);

port.on('message', (m: ToWorker) => {
  switch (m.t) {
    case 'begin': {
      const at = m.arena ? { arena: PlanArena.attach(m.arena.buffer), slot: m.arena.slot } : undefined;
      if (at) slots.set(m.id, at);
      sessions.set(m.id, new TrajectoryDecoder({ axes: m.axes, expectedBytes: m.expectedBytes, ...(at ? { storage: at.arena.storage(at.slot) } : {}) }));
      return;
    }
    case 'chunk': {
      const d = sessions.get(m.id);
      if (!d) return;
      try {
        d.push(m.bytes);
      } catch (e) {
        return crash(m.id, e);
      }
      const failed = d.failed;
      if (failed) {
        // A JSON error is the first problem of the whole body: refuse now, the rest need not be read.
        sessions.delete(m.id);
        slots.delete(m.id);
        d.reset();
        return refused(m.id, failed);
      }
      // The decoder copies what it keeps of a chunk (a token cut at its end), so the chunk's memory goes back
      // to the main thread for its next batch (index.ts BatchPool).
      const spare = m.bytes.buffer as ArrayBuffer;
      send({ t: 'ack', id: m.id, bytes: d.bytes, spare }, [spare]);
      return;
    }
    case 'end': {
      const d = sessions.get(m.id);
      if (!d) return;
      sessions.delete(m.id);
      const at = slots.get(m.id);
      slots.delete(m.id);
      try {
        const body = d.finish();
        const points = at ? inSlot(body.points, at.arena, at.slot) : compact(body.points);
        points.workspace = at ? at.arena.workspace(at.slot, points.count) : workspace(points.count, points.axes);
        // Only a request_id needs the key (service.ts dispatch): 80 ms of hashing a maximum upload otherwise spends for nothing.
        if (body.request.request_id !== undefined) points.digest = pointsArraysDigest(points);
        send({ t: 'done', id: m.id, request: body.request, points }, buffersOf(points));
      } catch (e) {
        if (e instanceof UploadRefusal) refused(m.id, e);
        else crash(m.id, e);
      }
      return;
    }
    case 'abort': {
      const d = sessions.get(m.id);
      sessions.delete(m.id);
      slots.delete(m.id);
      d?.reset();
      send({ t: 'aborted', id: m.id });
      return;
    }
    case 'stats':
      send({ t: 'stats', id: m.id, active: sessions.size, heldBytes: [...sessions.values()].reduce((a, d) => a + d.heldBytes(), 0) });
      return;
  }
});

function refused(id: number, e: UploadRefusal): void {
  const { code, status, label, detail, data, operation } = e;
  send({ t: 'refused', id, refusal: { code, status: status as 409 | 413, label, detail, data, operation } });
}

function crash(id: number, e: unknown): void {
  sessions.get(id)?.reset();
  sessions.delete(id);
  slots.delete(id);
  send({ t: 'crashed', id, message: e instanceof Error ? (e.stack ?? e.message) : String(e) });
}

/** Copy arrays much larger than their content to their exact size, so the transfer carries no slack. */
function compact(p: PointArrays): PointArrays {
  const fit = <T extends { length: number; buffer: ArrayBufferLike; byteLength: number; slice(): T }>(a: T): T =>
    a.buffer.byteLength > 2 * a.byteLength + 65536 ? a.slice() : a;
  return {
    count: p.count,
    axes: p.axes,
    timeNs: fit(p.timeNs),
    position: fit(p.position),
    velocity: carriesVelocity(p) ? fit(p.velocity) : new Float64Array(0),
    hasVelocity: fit(p.hasVelocity),
    ioMask: fit(p.ioMask),
    ioValues: fit(p.ioValues),
    ioFlags: fit(p.ioFlags),
  };
}

/** The plain buffers of a result, to transfer (views of an arena slot are shared: a SharedArrayBuffer cannot be transferred). */
function buffersOf(p: PointArrays): ArrayBuffer[] {
  const set = new Set<ArrayBuffer>();
  const add = (b: ArrayBufferLike) => {
    if (b instanceof ArrayBuffer) set.add(b);
  };
  for (const a of [p.timeNs, p.position, p.velocity, p.hasVelocity, p.ioMask, p.ioValues, p.ioFlags]) add(a.buffer);
  if (p.workspace) for (const a of [p.workspace.t, p.workspace.q, p.workspace.qd]) add(a.buffer);
  return [...set];
}

/** No point with a velocity: none to carry (core protocol.ts PlanArrays), 18 MB less for a maximum upload. */
function carriesVelocity(p: PointArrays): boolean {
  return p.hasVelocity.subarray(0, p.count).includes(1);
}

/** The decoded points as views of the slot they were written into, with compact's rule for velocity. */
function inSlot(p: PointArrays, arena: PlanArena, slot: number): PointArrays {
  return { count: p.count, axes: p.axes, ...arena.plan(slot, p.count, carriesVelocity(p)) };
}

/**
 * The memory the core will build this plan in, written once here so that its pages are faulted in on this
 * thread, not on the core's (core protocol.ts PlanWorkspace: 38 MB for a maximum upload).
 */
function workspace(count: number, axes: number): PlanWorkspace {
  const touched = (n: number) => new Float64Array(n).fill(0);
  return { t: touched(count), q: touched(count * axes), qd: touched(count * axes) };
}
