// How long a lease renewal waits for its answer while POST /v1/program receives and admits a large program
// (document 1 part 3: a renewal sent within its lease keeps the grant; part 4 prepare_program, part 8: a
// program is at most 39298580 bytes). A controller renews back to back (the next renewal 20 ms after the
// last answer) through a whole run; the run alternates idle phases with uploads of a ~3 MB and a ~20 MB
// program file (written with the harness's dense encoder before the first phase), and prints per phase the
// worst and p99 renewal round trip, then the ratio of each upload's worst to the idle phases' worst.
//
//   node --import tsx bench/program-renew.bench.ts [rounds]
//
// The stack is the reference stack on the sim driver, started as `hil run` starts it (from the prebuilt
// bundle); nothing here asserts anything. A service that admits the program on the thread that answers
// renewals shows the admission's length as the upload's worst renewal.

import { Cell } from '../harness/clients/cell.ts';
import type { BindingInput, ControlClient } from '../harness/clients/control.ts';
import { openTarget } from '../harness/targets/index.ts';
import { PREBUILT_ENV, prebuildReference } from '../harness/targets/reference.ts';
import { encodeProgram, move } from '../suites/program/files.ts';

const rounds = Number(process.argv[2] ?? 2);
const Q0 = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
const Q1 = Q0.map((x) => x + 0.02);

const quantile = (xs: number[], q: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

/** A nine-column program of two rest-to-rest segments, `samples` samples in all (153 bytes each). */
const file = (samples: number, revision: bigint) =>
  encodeProgram({ segments: [move('out', Q0, Q1, samples / 2), move('back', Q1, Q0, samples / 2)], manifestRevision: revision });

interface Phase {
  name: string;
  ms: number;
  renewMs: number[];
  outcome?: string;
}

async function main(): Promise<void> {
  process.env.HIL_TARGET ??= 'sim';
  const built = process.env[PREBUILT_ENV] ? undefined : await prebuildReference();
  if (built) process.env[PREBUILT_ENV] = built.dir;
  const target = await openTarget();
  try {
    const client: ControlClient = target.client();
    const d = (await client.describe()).reply.data as unknown as { binding: BindingInput & { revision: bigint } };
    const cell = new Cell(client, d.binding);
    const programs = [
      { name: '3MB', bytes: file(20_000, d.binding.revision) },
      { name: '20MB', bytes: file(130_000, d.binding.revision) },
    ];
    process.stdout.write(`programs: ${programs.map((p) => `${p.name} ${p.bytes.length} bytes`).join(', ')}\n`);
    // The cell's ceiling caps the lease (500 ms on the fixture's LAN profile): a renewal held past it finds
    // the grant expired; the refusal is counted and a new grant taken, so the run goes on.
    let s = await cell.grant({ requested_lease_ms: 10_000n });
    process.stdout.write(`lease ${s.grant.lease_ms} ms\nphase        ms  renewals  rn_p50ms  rn_p99ms  rn_maxms\n`);
    let sink: number[] = [];
    let refusals = { n: 0 };
    let renewing = true;
    const renewer = (async () => {
      while (renewing) {
        const t = performance.now();
        const r = await cell.fenced('renew', s);
        sink.push(performance.now() - t);
        if (r.status !== 200) {
          refusals.n++;
          s = await cell.grant({ requested_lease_ms: 10_000n });
        }
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    const phase = async (name: string, during: () => Promise<string | undefined>): Promise<Phase> => {
      const renewMs: number[] = [];
      sink = renewMs;
      refusals = { n: 0 };
      const refused = refusals;
      const t0 = performance.now();
      let outcome = await during();
      const ms = performance.now() - t0;
      // The renewal in flight when the phase ends belongs to it.
      await new Promise((res) => setTimeout(res, 60));
      sink = [];
      if (refused.n) outcome = `${refused.n} renewal(s) refused (lease ran out); ${outcome ?? ''}`;
      const p = { name, ms, renewMs, ...(outcome ? { outcome } : {}) };
      const f = (x: number) => x.toFixed(1).padStart(9);
      process.stdout.write(`${name.padEnd(8)} ${ms.toFixed(0).padStart(6)} ${String(renewMs.length).padStart(9)} ${f(quantile(renewMs, 0.5))} ${f(quantile(renewMs, 0.99))} ${f(Math.max(...renewMs))}${outcome ? `  ${outcome}` : ''}\n`);
      return p;
    };
    const phases: Phase[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const p of programs) {
        const up = await phase(p.name, async () => {
          const r = await client.raw('POST', '/v1/program', p.bytes, { 'content-type': 'application/octet-stream', 'x-control-session': s.session, 'x-control-generation': String(s.generation) });
          return `${r.status} ${Buffer.from(r.body).toString('utf8').slice(0, 60)}`;
        });
        // Idle for as long as the upload took: the same number of chances for a slow renewal.
        const idle = await phase('idle', () => new Promise((res) => setTimeout(() => res(undefined), Math.max(500, up.ms))));
        phases.push(up, idle);
      }
    }
    renewing = false;
    await renewer;
    await cell.cleanup();
    const worst = (name: string) => Math.max(...phases.filter((p) => p.name === name).flatMap((p) => p.renewMs));
    const idle = worst('idle');
    for (const p of programs) {
      process.stdout.write(`${p.name} upload/idle worst renewal: ${(worst(p.name) / idle).toFixed(2)}x (${worst(p.name).toFixed(1)} ms against ${idle.toFixed(1)} ms idle)\n`);
    }
  } finally {
    await target.close();
    await built?.remove();
  }
}

await main();
