// The program route's hand-over to the core (program-route.ts commitNow): a large program is written into a
// plan arena slot (sims/core/plan-arena.ts) whatever the slot held before (programs.ts programPlan, as the
// decode worker runs it), built by the core in the same slot, and its slot goes back when a newer
// preparation supersedes it.

import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { compileMachine } from '../config/compile.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { Grant, Reply } from './authority.ts';
import { CoreLink } from './core-link.ts';
import { HandleTable } from './handles.ts';
import { ProgramUploads } from './program-route.ts';
import { PlanLease } from '../core/plan-arena.ts';
import { programPlan, type PreparedProgram } from './programs.ts';
import type { TrajectoryOps } from './trajectories.ts';

// The nine-axis fixture, compiled here: sims/service/ may not import the core's test machine (harness/import-rule.test.ts).
const MACHINE: CompiledMachine = { ...compileMachine(readFileSync(new URL('../../fixtures/machines/nine-axis.json', import.meta.url), 'utf8')).machine, dir: '' };
const N = MACHINE.axes.length;
const COLS = 9;

/** A one-column program of `m` points 1 ms apart, J1 ramping by `step` a point from 0 (inside its limits). */
function program(m: number, step: number): PreparedProgram {
  const q = new Float64Array(m * COLS);
  const qd = new Float64Array(m * COLS);
  const tNs = new Float64Array(m);
  for (let k = 0; k < m; k++) {
    tNs[k] = k * 1_000_000;
    q[k * COLS] = k * step;
    qd[k * COLS] = step * 1000;
  }
  return {
    identity: {} as PreparedProgram['identity'],
    axisOf: [0],
    axisMask: 1,
    segments: 1,
    samples: m,
    points: { segment: new Uint32Array(m), localNs: tNs.slice(), tNs, q, qd, flags: new Uint8Array(m), ioMask: new Uint32Array(m), ioValues: new Uint32Array(m) },
    markers: [],
    requiresProcessIo: false,
  };
}

test('a large program is written into a free arena slot, over what the slot held, and built there; a newer one frees it', async () => {
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  await link.start();
  try {
    link.post({ t: 'grant', generation: 7n, deadlineNs: 1n << 62n, active: true, axisMask: (1 << N) - 1 });
    const route = new ProgramUploads({
      fence: () => {
        throw new Error('not used');
      },
      current: () => true,
      machine: MACHINE,
      manifestRevision: 1n,
      core: link,
      handles: new HandleTable(() => undefined),
      trajectories: {} as TrajectoryOps,
    });
    // A stepped core takes a large plan in a slice a cycle: the steps let it answer. The plan is written
    // into a slot the route claimed, as the decode worker writes it (sims/dense/decode-worker.ts).
    const commit = async (p: PreparedProgram) => {
      const m = p.points.segment.length;
      const slot = arena.claim();
      expect(slot).toBeGreaterThanOrEqual(0);
      programPlan(p, N, { plan: arena.plan(slot, m, true), workspace: arena.workspace(slot, m) });
      const { points, ...rest } = p;
      const admitted = { ...rest, count: m, segment: points.segment, plan: undefined, lease: new PlanLease(arena, slot) };
      const reply = (route as unknown as { commitNow(g: Grant, p: unknown): Promise<Reply> }).commitNow({ generation: 7n } as Grant, admitted);
      await link.step(100);
      return reply;
    };
    const arena = link.planArena!;
    const m = 20_000; // 1.4 MB of positions: above PLAN_ARENA_MIN_BYTES
    // What an earlier plan left in both slots.
    for (const s of [0, 1]) {
      const st = arena.storage(s);
      st.position.fill(9);
      st.velocity.fill(9);
      st.hasVelocity.fill(0);
    }
    const first = await commit(program(m, 1e-6));
    expect(first.status).toBe(200);
    expect(arena.state(0)).toBe('core');
    // The core built the plan in the slot's workspace: J1 in counts, every axis the program does not map 0.
    const built = arena.workspace(0, m);
    const a = MACHINE.axes[0]!;
    expect(built.q[(m - 1) * N]).toBeCloseTo((m - 1) * 1e-6 * a.sign * a.counts_per_unit, 6);
    for (let i = 1; i < N; i++) expect([built.q[(m - 1) * N + i], built.qd[(m - 1) * N + i]]).toEqual([0, 0]);
    const second = await commit(program(m, 2e-6));
    expect(second.status).toBe(200);
    // The first was superseded: its slot is free again; the second holds the other one.
    expect([arena.state(0), arena.state(1)]).toEqual(['free', 'core']);
  } finally {
    await link.shutdown();
  }
});
