// Decodes dense files off the service's main loop (document 1 part 4 prepare_program: the upload must not
// stall observations). Kept warm between uploads (starting a worker compiles the codec again, seconds of
// CPU on a loaded host). Receives {id, bytes} (transferred), answers {id, ...} with the decoded trajectory
// (typed arrays transferred) or the refusal's reason and text.

import { parentPort } from 'node:worker_threads';
import { DenseFormatError, decode, readMarkers } from './codec.ts';
import { lowerThreadPriority } from '../thread-priority.ts';

// Behind the main loop and the core in the scheduler's queue (sims/thread-priority.ts).
lowerThreadPriority();

parentPort!.on('message', (m: { id: number; bytes: Uint8Array; maxHeaderBytes: number }) => {
  try {
    const x = decode(m.bytes, { maxHeaderBytes: m.maxHeaderBytes });
    // JSON class instances do not survive structured cloning: the markers travel as plain shapes.
    const markers = readMarkers(x.processMarkers) ?? [];
    const out = { ...x, robotCell: undefined, processMarkers: undefined };
    parentPort!.postMessage({ id: m.id, ok: out, markers }, [x.t.buffer, x.q.buffer, x.qd.buffer, x.flags.buffer] as ArrayBuffer[]);
  } catch (e) {
    if (e instanceof DenseFormatError) parentPort!.postMessage({ id: m.id, reason: e.reason, message: e.message });
    else parentPort!.postMessage({ id: m.id, defect: (e as Error).message });
  }
});
