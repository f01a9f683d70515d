// Test equipment (like the simulated bench box): a CAD/seam worker for the reference OLP server's worker
// bridge (docs/profile.md "OLP server: worker bridge": 4-byte big-endian length frames of JSON over
// standard input and output) that misbehaves on request, so that every worker code of document 3 part 7
// can be reached from a client. Plain JavaScript, no imports from the project: the OLP server starts it
// as a process of its own.
//
// Arguments: --ledger DIR   write DIR/<token> (this process's pid) when a request carries {ledger: token}
//            --unavailable  say at start that the worker environment is missing, then exit
// Request body fields (besides operation): fault = "refuse" | "crash" | "garbage" | "wrong_shape" |
// "wrong_id" | "hang" | "hold" (until DIR/<ledger token>.release exists), sleep_ms (answer after that long), part (the part to name in the reply).

import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const SCHEMA = 'offline-programming.worker.v1';
const args = process.argv.slice(2);
const ledger = args.includes('--ledger') ? args[args.indexOf('--ledger') + 1] : undefined;

function send(payload) {
  const body = Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload), 'utf8');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  process.stdout.write(Buffer.concat([head, body]));
}

if (args.includes('--unavailable')) {
  send({ schema: SCHEMA, ready: false, code: 'unavailable', error: 'fault worker: told to report its environment missing' });
  process.stdout.end(() => process.exit(0));
} else {
  send({ schema: SCHEMA, ready: true, pid: process.pid, operations: ['*'] });
  let buf = Buffer.alloc(0);
  process.stdin.on('data', (c) => {
    buf = Buffer.concat([buf, c]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const n = buf.readUInt32BE(0);
      const req = JSON.parse(buf.subarray(4, 4 + n).toString('utf8'));
      buf = buf.subarray(4 + n);
      handle(req);
    }
  });
  process.stdin.on('end', () => process.exit(0));
}

function handle(req) {
  const b = req.body ?? {};
  // Written whole under another name and renamed: a reader never sees the file empty.
  if (ledger && typeof b.ledger === 'string') {
    writeFileSync(join(ledger, `.${b.ledger}.${process.pid}`), String(process.pid));
    renameSync(join(ledger, `.${b.ledger}.${process.pid}`), join(ledger, b.ledger));
  }
  const answer = () => {
    switch (b.fault) {
      case 'refuse':
        return send({ id: req.id, ok: false, code: 'invalid_request', error: `fault worker refuses ${b.operation}` });
      case 'crash':
        return process.exit(70);
      case 'garbage':
        return send('this is not JSON');
      case 'wrong_shape':
        return send({ id: req.id, answer: 42 });
      case 'wrong_id':
        return send({ id: req.id + 1000, ok: true, result: {}, part: 'x' });
      case 'hang':
        return undefined;
      case 'hold': {
        // Answer once the test writes DIR/<token>.release (a worker held busy for as long as the test needs).
        const release = join(ledger, `${b.ledger}.release`);
        const t = setInterval(() => {
          if (existsSync(release)) {
            clearInterval(t);
            send({ id: req.id, ok: true, result: { route: req.route, operation: b.operation ?? null, pid: process.pid }, part: 'held' });
          }
        }, 10);
        return undefined;
      }
      default:
        return send({ id: req.id, ok: true, result: { route: req.route, operation: b.operation ?? null, pid: process.pid }, part: typeof b.part === 'string' ? b.part : 'fixture-part' });
    }
  };
  if (typeof b.sleep_ms === 'number') setTimeout(answer, b.sleep_ms);
  else answer();
}
