// Decodes one dense file off the service's main loop (document 1 part 4 prepare_program: the upload
// must not stall observations). Receives the bytes (transferred), answers with the decoded trajectory
// (typed arrays transferred) or the refusal's reason and text.

import { parentPort } from 'node:worker_threads';
import { DenseFormatError, decode } from './codec.ts';

parentPort!.once('message', (m: { bytes: Uint8Array; maxHeaderBytes: number }) => {
  try {
    const x = decode(m.bytes, { maxHeaderBytes: m.maxHeaderBytes });
    // JSON class instances do not survive structured cloning; the admission only needs the marker count.
    const markers = Array.isArray(x.processMarkers) ? x.processMarkers.length : 0;
    const out = { ...x, robotCell: undefined, processMarkers: Array.from({ length: markers }, () => null) };
    parentPort!.postMessage({ ok: out }, [x.t.buffer, x.q.buffer, x.qd.buffer, x.flags.buffer] as ArrayBuffer[]);
  } catch (e) {
    if (e instanceof DenseFormatError) parentPort!.postMessage({ reason: e.reason, message: e.message });
    else parentPort!.postMessage({ defect: (e as Error).message });
  }
});
