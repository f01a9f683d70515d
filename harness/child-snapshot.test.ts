// The planning process of a prebuilt run starts from a V8 startup snapshot of its bundle
// (harness/targets/reference.ts buildChildSnapshot, sims/planner/child.ts). What it answers must not depend
// on how it started: the same job, sent to a process started from the bundle and to one started from the
// snapshot, gets the same stages, the same result (but the measured stage timings) and the same dense file,
// byte for byte. A plan whose test hook starts a helper process (the cancellation suite's) still plans and
// starts its helper: a process started from a snapshot has no dynamic import, which is how the helper's
// module was first loaded there. And a planner whose planning processes cannot load the snapshot (Node
// refuses one built under other V8 flags, here a NODE_OPTIONS the run did not have) still plans: from the
// bundle, saying so once on its standard error.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { fixtureJobOptions, fixtureWeldplan } from './clients/weldplan.ts';
import { PlannerClient, planQueryString } from './clients/planner.ts';
import { CHILD_SNAPSHOT, namedOrBuiltBundle, referenceEnv, type Prebuilt } from './targets/reference.ts';
import { spawnReady } from './targets/spawn.ts';

let built: Prebuilt | undefined;
let dir = '';
let tmp = '';
beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'hil-child-snapshot-'));
  built = await namedOrBuiltBundle();
  dir = built.dir;
}, 120_000);
afterAll(async () => {
  await built?.remove();
  rmSync(tmp, { recursive: true, force: true });
});

const OPTIONS = fixtureJobOptions({ program_id: 'snapshot-check', manifest_revision: 3n, plan_revision: 4n });

/** Live processes of process group `pgid` (a zombie has ended: it only waits to be reaped). */
function groupMembers(pgid: number): number {
  let n = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[2]) === pgid && f[0] !== 'Z' && f[0] !== 'X') n++;
    } catch {
      // gone meanwhile
    }
  }
  return n;
}

/**
 * One job in a planning process started with these node arguments: its messages, exit code, dense file, and
 * how many processes of its group were still running when it exited (the helpers its plan started).
 */
function plan(nodeArgs: string[], bytes: Uint8Array, name: string): Promise<{ messages: unknown[]; code: number | null; stderr: string; dense: Buffer | undefined; helpers: number }> {
  const tmpPath = join(tmp, `${name}.rdt`);
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, nodeArgs, { cwd: tmp, env: referenceEnv(), detached: true, stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'advanced' });
    const messages: unknown[] = [];
    let stderr = '';
    c.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    c.on('message', (m) => messages.push(m));
    c.on('error', reject);
    c.on('exit', (code) => {
      const helpers = groupMembers(c.pid!);
      // The process led its own group: a helper its plan started goes with it (the planner stub ends the
      // group the same way, document 2 part 1).
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        // the group is gone already
      }
      resolve({ messages, code, stderr, dense: existsSync(tmpPath) ? readFileSync(tmpPath) : undefined, helpers });
    });
    c.send({ bytes, options: OPTIONS, tmpPath });
  });
}

test('the run builds the snapshot without a complaint from Node', () => {
  expect(existsSync(join(dir, CHILD_SNAPSHOT))).toBe(true);
  expect(existsSync(join(dir, `${CHILD_SNAPSHOT}.log`))).toBe(false);
});

test('a plan from the snapshot is the plan from the bundle: stages, result and dense file (but the times they carry)', { timeout: 60_000 }, async () => {
  const bytes = fixtureWeldplan();
  const fromBundle = await plan([join(dir, 'planner-child.cjs')], bytes, 'bundle');
  const fromSnapshot = await plan(['--snapshot-blob', join(dir, CHILD_SNAPSHOT)], bytes, 'snapshot');
  expect(fromBundle.code, fromBundle.stderr).toBe(0);
  expect(fromBundle.helpers).toBe(0);
  const done = fromBundle.messages.at(-1) as { kind: string; dense: { bytes: number } | null };
  expect(done.kind).toBe('done');
  expect(done.dense?.bytes).toBeGreaterThan(0);
  expect(fromBundle.dense?.length).toBe(done.dense?.bytes);
  expect(comparable(fromSnapshot)).toEqual(comparable(fromBundle));
});

/**
 * A plan's outcome with what depends on when it ran left out: the values of its result's timings_ms (what
 * each stage measured it took) and the dense header's created_at (to the second; the content digest leaves
 * it out), each checked to be there.
 */
function comparable(r: Awaited<ReturnType<typeof plan>>): unknown {
  const dense = r.dense?.toString('latin1');
  expect(dense).toMatch(/"created_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"/);
  return {
    ...r,
    dense: dense?.replace(/"created_at":"[^"]*"/, '"created_at":"(when it ran)"'),
    messages: r.messages.map((m) => {
      const d = m as { kind: string; resultText?: string };
      if (d.kind !== 'done' || d.resultText === undefined) return m;
      const result = JSON.parse(d.resultText) as { timings_ms?: Record<string, number> };
      expect(Object.keys(result.timings_ms ?? {}).length).toBeGreaterThan(0);
      return { ...d, resultText: { ...result, timings_ms: Object.keys(result.timings_ms ?? {}) } };
    }),
  };
}

test('a plan whose hook starts a helper process plans from the snapshot too, and starts its helper', { timeout: 60_000 }, async () => {
  const r = await plan(['--snapshot-blob', join(dir, CHILD_SNAPSHOT)], fixtureWeldplan({ stage_delay_ms: 20, helper_process: true }), 'helper');
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect((r.messages.at(-1) as { kind: string }).kind).toBe('done');
  expect(r.helpers).toBe(1);
});

test('a planner whose planning processes cannot load the snapshot plans from the bundle and says so once', { timeout: 120_000 }, async () => {
  const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=3072`.trim() };
  const p = await spawnReady<{ planner: string }>('planner', [join(dir, 'planner.js'), 'serve', '--host', '127.0.0.1', '--port', '0', '--dense-store-dir', join(tmp, 'store'), '--lifeline-stdin'], env, 60_000);
  try {
    const client = new PlannerClient(p.ready.planner);
    const bytes = fixtureWeldplan();
    for (const round of [1, 2]) {
      const r = await client.raw('POST', `/api/motion/plan${planQueryString({ dense: true })}`, bytes, { 'content-type': 'application/octet-stream' });
      expect(r.status, `plan ${round}: ${r.text}`).toBe(200);
    }
    expect(p.stderr().match(/could not start from its startup snapshot \(exit 14/g)).toHaveLength(1);
  } finally {
    await p.stop();
  }
});
