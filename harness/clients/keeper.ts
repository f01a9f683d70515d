// Keeping a held grant alive off the test's event loop (DESIGN.md rule 6). A test that holds a grant while
// it works (Cell.hold) is not about the lease: its renewals go from a worker thread of their own
// (harness/clients/keeper-worker.mjs), so a stall of the test's loop cannot make the grant expire. Each
// renewal comes back with when it was due, sent and answered; when one is refused `expired` (document 1
// part 4: the lease ran out), the figures decide whose doing that was:
//
//   the previous accepted renewal (or the acquire) was sent at s_j, so the service set its deadline no
//   earlier than s_j + lease_ms; the refused one was sent at s_k and answered within rtt_k, so the service
//   saw it no later than s_k + rtt_k. If (s_k - s_j) + rtt_k <= lease_ms, the service expired a grant that
//   was renewed in time: the target broke the rule (the test's failure stands, FAIL). Otherwise the harness
//   cannot prove the target wrong (its renewal left late or took too long to arrive): what failed after it
//   is ERROR HIL_ERR_HOST_TOO_SLOW with these figures.

import { Worker } from 'node:worker_threads';
import type { ControlClient } from './control.ts';
import { REQUEST_SCHEMA } from './control.ts';

export interface RenewalRecord {
  /** Epoch ms (performance.timeOrigin + performance.now()). */
  due: number;
  sent: number;
  answered: number;
  status: number;
  label: string;
  error: string;
}

export const epochNow = (): number => performance.timeOrigin + performance.now();

/** Whose doing a refused renewal was, from the figures (the rule in the file's header). */
export interface GrantLoss {
  /** The target expired a grant that the harness provably renewed in time. */
  target: boolean;
  text: string;
}

/** Judge a kept grant's renewals: undefined while none was refused `expired`. */
export function judgeRenewals(startSent: number, leaseMs: number, records: readonly RenewalRecord[]): GrantLoss | undefined {
  let lastAccepted = startSent;
  for (const r of records) {
    if (r.status === 200) {
      lastAccepted = r.sent;
      continue;
    }
    if (r.label !== 'expired') return undefined; // stale or another refusal: the test ended the grant itself
    const gap = r.sent - lastAccepted;
    const rtt = r.answered - r.sent;
    const late = r.sent - r.due;
    const f = (x: number) => Math.round(x * 10) / 10;
    const figures = `renewal sent ${f(gap)} ms after the last accepted one (${f(Math.max(0, late))} ms after it was due), answered in ${f(rtt)} ms; lease ${leaseMs} ms`;
    if (gap + rtt <= leaseMs) return { target: true, text: `the target expired a grant renewed in time: ${figures} (${f(gap + rtt)} ms <= lease): ${r.error}` };
    return { target: false, text: `the harness's keeper lost the grant to the host's lateness: ${figures}; ${f(gap + rtt)} ms > lease, so the renewal may have reached the service after the deadline the previous one set (document 1 part 3, renew): ${r.error}` };
  }
  return undefined;
}

interface Kept {
  startSent: number;
  leaseMs: number;
  records: RenewalRecord[];
}

let worker: Worker | undefined;
const kept = new Map<number, Kept>();
let ids = 0;

/**
 * The process's keeper thread, started on first use; `startKeeper` starts it ahead of the first held grant
 * (a thread takes a few hundred ms to come up on a loaded host, longer than a renewal period). Plain Node
 * options (no inherited loader hooks of the test runner): the worker file is JavaScript.
 */
export function startKeeper(): void {
  keeperWorker();
}

function keeperWorker(): Worker {
  if (worker) return worker;
  const w = new Worker(new URL('./keeper-worker.mjs', import.meta.url), { execArgv: [] });
  w.unref();
  w.on('message', (m: RenewalRecord & { id: number }) => kept.get(m.id)?.records.push(m));
  w.on('error', (e) => process.stderr.write(`warning: the grant keeper's thread failed: ${e.message}\n`));
  w.on('exit', () => {
    if (worker === w) worker = undefined;
  });
  worker = w;
  return w;
}

/** A grant kept alive by the keeper's thread; `stop` ends its renewals (its records stay readable). */
export interface KeptGrant {
  stop(): void;
  loss(): GrantLoss | undefined;
  readonly records: readonly RenewalRecord[];
}

/**
 * Renew `session` every `everyMs` from the keeper's thread, starting from `startSent` (epoch ms, just
 * before the acquire was sent), until stopped or a renewal is refused.
 */
export function keepGrant(client: ControlClient, s: { session: string; generation: bigint }, leaseMs: number, everyMs: number, startSent: number): KeptGrant {
  const id = ++ids;
  const k: Kept = { startSent, leaseMs, records: [] };
  kept.set(id, k);
  const connection = client.https ? { https: client.https } : { socketPath: client.socketPath };
  keeperWorker().postMessage({ op: 'add', id, connection, schema: REQUEST_SCHEMA, session: s.session, generation: String(s.generation), start: epochNow(), every: everyMs });
  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      worker?.postMessage({ op: 'remove', id });
      // Records that arrive after this are not read; the entry goes.
      setTimeout(() => kept.delete(id), 0).unref();
    },
    loss: () => judgeRenewals(k.startSent, k.leaseMs, k.records),
    records: k.records,
  };
}
