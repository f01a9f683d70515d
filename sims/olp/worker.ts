// The reference CAD and seam worker (`hil olp worker`, started by the OLP server with --cad-worker
// builtin / --seam-worker builtin): the bridge's frames on standard input and output (./workers.ts,
// docs/profile.md "OLP server: worker bridge"), one request at a time, the operations of ./geometry.ts on
// STEP files read by OpenCascade (occt-import-js, WebAssembly). Without occt-import-js the worker says
// its environment is missing (503 unavailable).

import { createRequire } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { FrameReader, frame, WORKER_SCHEMA } from './workers.ts';
import { operate, OPERATIONS, Refusal, type Occt } from './geometry.ts';

/** A request frame: the 12 MiB body and its envelope. */
const MAX_REQUEST_BYTES = 13 * 1024 * 1024;

/** Load OpenCascade; the package name is not a literal so that a bundle leaves it (and its .wasm) in node_modules. */
export async function loadOcct(): Promise<Occt> {
  // Baseline (Liftoff) code only: optimising OpenCascade's 7.6 MB WebAssembly in the background cost
  // about 2 s of the first STEP read here (340 ms without it), and the worker's reads are short.
  setFlagsFromString('--liftoff-only');
  const name = process.env.HIL_OLP_OCCT_MODULE ?? 'occt-import-js';
  const require = createRequire(import.meta.url);
  const factory = require(name) as (module?: { print?: (t: string) => void; printErr?: (t: string) => void }) => Promise<Occt>;
  // OpenCascade's messages (its transfer statistics on a file it cannot read, lines of asterisks) go to
  // stderr: stdout carries the bridge's length-prefixed frames, and a stray line there reads as a frame
  // length (docs/profile.md "OLP server: worker bridge"), so a non-STEP input answered 502 invalid_response
  // instead of the worker's refusal, 400 invalid_request (document 3 part 7).
  const toStderr = (t: string) => void process.stderr.write(`${t}\n`);
  return factory({ print: toStderr, printErr: toStderr });
}

export async function runWorker(): Promise<void> {
  const send = (v: unknown) => process.stdout.write(frame(JSON.stringify(v)));
  let occt: Occt;
  try {
    occt = await loadOcct();
  } catch (e) {
    send({ schema: WORKER_SCHEMA, ready: false, code: 'unavailable', error: `OpenCascade (occt-import-js) cannot be loaded: ${(e as Error).message.split('\n')[0]}` });
    process.stdout.end(() => process.exit(0));
    return;
  }
  send({ schema: WORKER_SCHEMA, ready: true, pid: process.pid, operations: OPERATIONS });
  const reader = new FrameReader(
    MAX_REQUEST_BYTES,
    (f) => {
      let req: { id: number; route: string; body: Record<string, unknown> };
      try {
        req = JSON.parse(f.toString('utf8'));
      } catch {
        process.exit(65); // the bridge sends JSON; anything else is a broken pipe, not a request
      }
      try {
        const { result, part } = operate(occt, req.route, req.body);
        send({ id: req.id, ok: true, result, part });
      } catch (e) {
        if (e instanceof Refusal) send({ id: req.id, ok: false, code: 'invalid_request', error: e.message });
        else throw e; // a defect: the worker dies and the bridge answers worker_failed
      }
    },
    () => process.exit(65),
  );
  process.stdin.on('data', (c: Buffer) => reader.push(c));
  process.stdin.on('end', () => process.exit(0));
}
