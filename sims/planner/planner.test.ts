// Unit tests of the planner stub from the inside: its cell table against the machine file it stands for,
// the program validator and canonical JSON on the sealed fixture (sealed by the harness's own writer, so
// the two canonical forms are held to the same digests), the query table, a plan's determinism, and
// `hil serve --planner-port 0` starting the planner beside the stack, and the stage hold hook.

import { get as httpGet } from 'node:http';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { zipSync, strToU8 } from 'fflate';
import { describe, expect, test } from 'vitest';
import { decodeJson, JsonObject } from '../json.ts';
import { CELLS, jointsAt, unreachableAxis } from './cell.ts';
import { canonicalDigest, without } from './canonical.ts';
import { canonicalJson } from '../json.ts';
import { parsePlanQuery } from './options.ts';
import { plan, releasePath, stubHooks } from './plan.ts';
import { validateProgram } from './program.ts';
import { readWeldplan } from './weldplan.ts';
import { PlannerService, storeDirectory } from './server.ts';
import { sealProgram } from '../../harness/clients/weldplan.ts';
import { encodeUtf8, parseExact, stringifyExact, type JsonObject as JsonObjectExact } from '../../harness/oracle/json.ts';

const FIXTURE = new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url);
const MACHINE = new URL('../../fixtures/machines/nine-axis.json', import.meta.url);
const programBytes = () => new Uint8Array(readFileSync(FIXTURE));

function container(program: Uint8Array): Uint8Array {
  const doc = validateProgram(decodeJson(program));
  const tooling = strToU8('{"tool_id":"t"}');
  const sha = (b: Uint8Array) => 'sha256:' + createHash('sha256').update(b).digest('hex');
  const manifest = { schema: 'weldplan.manifest.v1', program_id: doc.programId, cell_id: doc.cellId, program_digest: doc.digest, entries: [{ name: 'program.json', sha256: sha(program), bytes: program.length }, { name: 'tooling.json', sha256: sha(tooling), bytes: tooling.length }] };
  return zipSync({ 'manifest.json': strToU8(JSON.stringify(manifest)), 'program.json': program, 'tooling.json': tooling }, { mtime: new Date('1980-01-01T00:00:00Z') });
}

describe('cell table', () => {
  test('sim-nine-axis has the machine file position limits and ceilings below its max_velocity', () => {
    const m = JSON.parse(readFileSync(MACHINE, 'utf8')) as { axes: Array<{ name: string; limits: { min: number; max: number; max_velocity: number } }> };
    const c = CELLS['sim-nine-axis']!;
    expect(c.axisNames).toEqual(m.axes.map((a) => a.name));
    expect(c.min).toEqual(m.axes.map((a) => a.limits.min));
    expect(c.max).toEqual(m.axes.map((a) => a.limits.max));
    c.ceiling.forEach((v, j) => expect(v).toBeLessThan(m.axes[j]!.limits.max_velocity));
    expect(unreachableAxis(c, c.home)).toBe(-1);
    expect(unreachableAxis(c, jointsAt([0.5, 5, 0.3], c.home))).toBe(0); // J1 = 4 rad
  });
});

describe('program document and canonical JSON', () => {
  test('the sealed fixture validates and its digests are the harness-sealed ones', () => {
    const doc = decodeJson(programBytes()) as JsonObject;
    const v = validateProgram(doc);
    expect(v.digest).toBe(doc.get('program_digest'));
    expect(v.nodes).toHaveLength(5);
  });

  test('canonical JSON: sorted keys, no whitespace, exact integers, shortest floats, -0 as 0, non-finite refused', () => {
    const v = decodeJson(strToU8('{"b": [1.0, 1e2, -0, 0.1], "a": {"z": 18446744073709551617, "y": "é"}}'));
    expect(canonicalJson(v)).toBe('{"a":{"y":"é","z":18446744073709551617},"b":[1,100,0,0.1]}');
    expect(() => canonicalJson(decodeJson(strToU8('{"x": 1e400}')))).toThrow(/non-finite/);
    const o = decodeJson(strToU8('{"program_digest": "x", "k": 1}')) as JsonObject;
    expect(canonicalDigest(without(o, 'program_digest'))).toBe(canonicalDigest(decodeJson(strToU8('{"k":1}'))));
  });
});

describe('query table', () => {
  test('defaults, ranges and the backend check', () => {
    const d = parsePlanQuery(new URLSearchParams(''));
    expect('ok' in d && d.ok).toMatchObject({ k_best: 5, samples_per_seam: null, verify_margin_mm: 2, dense: false, manifest_revision: 1n, free_space_backend: 'bspline' });
    const bad = parsePlanQuery(new URLSearchParams('k_best=17&k_best=0&verify_margin_mm=50.0001'));
    expect('status' in bad && bad.body.detail).toEqual([
      { loc: ['query', 'k_best'], msg: 'Input should be greater than or equal to 1', type: 'greater_than_equal', input: '0' },
      { loc: ['query', 'verify_margin_mm'], msg: 'Input should be less than or equal to 50', type: 'less_than_equal', input: '50.0001' },
    ]);
    const backend = parsePlanQuery(new URLSearchParams('free_space_backend=ompl'));
    expect('status' in backend && typeof backend.body.detail).toBe('string');
  });
});

describe('planning', () => {
  test('the fixture plans to a checked dense file; the same request gives the same trajectory digest', async () => {
    const w = readWeldplan(container(programBytes()));
    const o = { k_best: 5, screen_collisions: true, samples_per_seam: null, run_weld_trajopt: true, run_connecting_trajopt: true, free_space_backend: 'bspline', verify: true, verify_margin_mm: 2, order_seams: false, dense: true, program_id: 'p1', manifest_revision: 1n, plan_revision: 1n };
    const stages: string[] = [];
    const a = await plan(w, o, async (s) => void stages.push(s));
    const b = await plan(w, o, async () => undefined);
    expect(stages).toEqual(['sweep', 'weldseam', 'freespace seed', 'optimize', 'verify', 'dense']);
    expect(a.denseError).toBeUndefined();
    expect(a.dense!.digest).toBe(b.dense!.digest);
    expect(a.requestSha256).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('the header fault hook', () => {
  test('header_defect "schema": the planner\'s own check names the document 2 spelling schema_mismatch and stores nothing', async () => {
    const doc = parseExact(programBytes()) as Record<string, any>;
    doc.extensions = { ...(doc.extensions ?? {}), weld_planner_stub: { header_defect: 'schema' } };
    const w = readWeldplan(container(encodeUtf8(stringifyExact(sealProgram(doc as JsonObjectExact)))));
    const o = { k_best: 5, screen_collisions: true, samples_per_seam: null, run_weld_trajopt: true, run_connecting_trajopt: true, free_space_backend: 'bspline', verify: true, verify_margin_mm: 2, order_seams: false, dense: true, program_id: 'p1', manifest_revision: 1n, plan_revision: 1n };
    const r = await plan(w, o, async () => undefined);
    expect(r.dense).toBeUndefined();
    expect(r.denseError).toMatchObject({ reason: 'schema_mismatch', segment_index: null });
  });
});

describe('intake before the planning process', () => {
  test('an unreadable container is answered 422 with its planning failure and starts no planning process; a readable one gets one', async () => {
    const store = mkdtempSync(join(tmpdir(), 'hil-planner-intake-'));
    const p = new PlannerService({ host: '127.0.0.1', port: 0, storeDir: store });
    const url = await p.start();
    try {
      const post = async (body: Uint8Array) => {
        const r = await fetch(`${url}/api/motion/plan`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
        return { status: r.status, body: (await r.json()) as { error?: string } };
      };
      const bad = await post(strToU8('not a zip at all'));
      expect(bad.status).toBe(422);
      expect(bad.body.error).toMatch(/^BadZipFile: /);
      // a container whose program entry does not match the manifest's digest: read, refused, no process
      const good = container(programBytes());
      const torn = zipSync({ ...Object.fromEntries(Object.entries((await import('fflate')).unzipSync(good))), 'tooling.json': strToU8('{"tool_id":"u"}') });
      const mismatch = await post(torn);
      expect(mismatch.status).toBe(422);
      expect(p.processesStarted).toBe(0);
      const ok = await post(good);
      expect(ok.status).toBe(200);
      // the plan's own process and the one started ahead for the next plan
      expect(p.processesStarted).toBe(2);
      expect((await post(strToU8('PK'))).status).toBe(422);
      expect(p.processesStarted).toBe(2);
    } finally {
      await p.stop();
      rmSync(store, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('store directory', () => {
  test('--dense-store-dir, then WELD_PLANNER_DENSE_STORE_DIR, then the per-user cache', () => {
    expect(storeDirectory('/flag', { WELD_PLANNER_DENSE_STORE_DIR: '/env', XDG_CACHE_HOME: '/xdg' })).toBe('/flag');
    expect(storeDirectory(undefined, { WELD_PLANNER_DENSE_STORE_DIR: '/env', XDG_CACHE_HOME: '/xdg' })).toBe('/env');
    expect(storeDirectory(undefined, { XDG_CACHE_HOME: '/xdg' })).toBe('/xdg/weld-planner/dense');
    expect(storeDirectory(undefined, {})).toBe(join(homedir(), '.cache', 'weld-planner', 'dense'));
  });
});

describe('hil serve --planner-port', () => {
  test('0 starts the planner beside the stack on a free port and prints its URL in the ready line; --planner-allowed-host reaches the planner\'s Host allow-list', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hil-planner-'));
    const main = fileURLToPath(new URL('../main.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), main, '--socket-dir', dir, '--lifeline-stdin', '--planner-port', '0', '--planner-allowed-host', 'cell-7.example'], { stdio: ['pipe', 'pipe', 'pipe'] });
    try {
      const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
        let out = '';
        child.stdout!.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          const line = out.split('\n').find((l) => l.startsWith('ready '));
          if (line) resolve(JSON.parse(line.slice(6)) as Record<string, unknown>);
        });
        child.once('exit', (code) => reject(new Error(`exited ${code}`)));
      });
      expect(ready.planner).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(String(ready.planner)).not.toMatch(/:8796$/);
      const health = await fetch(`${ready.planner as string}/api/motion/health`);
      expect(await health.json()).toEqual({ cuda: false, device: null });
      // The named host with the planner's port is answered; another name is refused (sims/local-guard.ts).
      const port = new URL(String(ready.planner)).port;
      const asHost = (host: string) =>
        new Promise<number>((res, rej) => {
          const r = httpGet({ host: '127.0.0.1', port: Number(port), path: '/api/motion/health', headers: { Host: `${host}:${port}` } }, (m) => {
            m.resume();
            res(m.statusCode ?? 0);
          });
          r.on('error', rej);
        });
      expect(await asHost('cell-7.example')).toBe(200);
      expect(await asHost('cell-8.example')).toBe(403);
    } finally {
      const exited = new Promise((r) => child.once('exit', r));
      child.stdin!.end();
      const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(kill);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

/** `hil planner serve` on loopback with its store in `dir` (tsx, no bundle), and the URL its ready line gives. */
function startPlanner(dir: string): { planner: ReturnType<typeof spawn>; url: Promise<string> } {
  const main = fileURLToPath(new URL('./main.ts', import.meta.url));
  const planner = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), main, 'serve', '--host', '127.0.0.1', '--port', '0', '--dense-store-dir', dir], { stdio: ['ignore', 'pipe', 'ignore'] });
  const url = new Promise<string>((resolve, reject) => {
    let out = '';
    planner.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ready '));
      if (line) resolve(String((JSON.parse(line.slice(6)) as Record<string, unknown>).planner));
    });
    planner.once('exit', (code) => reject(new Error(`planner exited ${code}`)));
  });
  return { planner, url };
}

describe('a planner that is killed', () => {
  /** The pids whose parent is `ppid` (/proc). */
  const childrenOf = (ppid: number): number[] =>
    readdirSync('/proc')
      .filter((n) => /^[0-9]+$/.test(n))
      .filter((n) => {
        try {
          return Number(readFileSync(`/proc/${n}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[1]) === ppid;
        } catch {
          return false;
        }
      })
      .map(Number);
  /** The stub's helper process (plan.ts stubHooks helper_process): a node sleeping ten minutes. */
  const isHelper = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('600000');
    } catch {
      return false;
    }
  };
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  test('kill -9 mid-plan: the planning process and the helper it started end too (nobody is left to end them at their time limit)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hil-planner-kill-'));
    const { planner, url: ready } = startPlanner(dir);
    try {
      const url = await ready;
      // A plan slowed by the stub's hook (a minute per stage), with a helper in its process group.
      const doc = parseExact(new TextDecoder().decode(programBytes())) as JsonObjectExact;
      doc.extensions = { weld_planner_stub: { stage_delay_ms: 60_000, helper_process: true } };
      const body = container(encodeUtf8(stringifyExact(sealProgram(doc))));
      void fetch(`${url}/api/motion/plan`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body }).catch(() => undefined);
      let planning: number[] = [];
      for (let i = 0; i < 600 && planning.length === 0; i++) {
        const st = (await (await fetch(`${url}/api/motion/progress`)).json()) as { stage?: unknown };
        if (typeof st.stage === 'string') planning = childrenOf(planner.pid!).filter((c) => childrenOf(c).some(isHelper));
        if (planning.length === 0) await new Promise((r) => setTimeout(r, 50));
      }
      expect(planning, 'a planning process with its helper').toHaveLength(1);
      const helpers = childrenOf(planning[0]!).filter(isHelper);
      planner.kill('SIGKILL');
      const gone = [...planning, ...helpers];
      for (let i = 0; i < 600 && gone.some(alive); i++) await new Promise((r) => setTimeout(r, 50));
      expect(gone.filter(alive)).toEqual([]);
    } finally {
      if (planner.exitCode === null && planner.signalCode === null) planner.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('the stage hold hook (docs/profile.md "Test hooks": stage_release)', () => {
  const withHooks = (hooks: Record<string, unknown>) => {
    const doc = parseExact(new TextDecoder().decode(programBytes())) as JsonObjectExact;
    doc.extensions = { weld_planner_stub: hooks } as unknown as JsonObjectExact;
    return container(encodeUtf8(stringifyExact(sealProgram(doc))));
  };

  test('a token names a release file in the temporary directory; a path, an empty or an over-long name is no token', () => {
    const token = (v: unknown) => stubHooks(readWeldplan(withHooks({ stage_delay_ms: 100, stage_release: v }))).stageRelease;
    expect(token('abc_DEF-123')).toBe('abc_DEF-123');
    expect(releasePath('abc', '/tmp/x')).toBe('/tmp/x/weld-planner-stub-release-abc');
    for (const bad of ['../etc/passwd', 'a/b', '', 'x'.repeat(65), 'a.b', 7]) expect(token(bad), String(bad)).toBeUndefined();
    expect(token('x'.repeat(64))).toBe('x'.repeat(64));
  });

  test('a plan held by a minute per stage stays in its stage until its release file appears, then finishes at once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hil-planner-hold-'));
    const { planner, url: ready } = startPlanner(dir);
    const token = `unit-${process.pid}-${Date.now()}`;
    const release = releasePath(token);
    try {
      const url = await ready;
      const stage = async () => ((await (await fetch(`${url}/api/motion/progress`)).json()) as { stage: unknown }).stage;
      let answered = false;
      const reply = fetch(`${url}/api/motion/plan`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: withHooks({ stage_delay_ms: 60_000, stage_release: token }) }).then((r) => ((answered = true), r));
      let first: unknown = null;
      for (let i = 0; i < 600 && typeof first !== 'string'; i++) {
        first = await stage();
        if (typeof first !== 'string') await new Promise((r) => setTimeout(r, 50));
      }
      expect(first).toBe('sweep');
      // Held: half a second on, the same stage and no answer (without the hook's wait it plans in well under that).
      await new Promise((r) => setTimeout(r, 500));
      expect([await stage(), answered]).toEqual(['sweep', false]);
      writeFileSync(release, '');
      // Let go: the remaining five stages pass at once (a minute each otherwise, past this test's timeout).
      expect((await reply).status).toBe(200);
    } finally {
      planner.kill('SIGKILL');
      rmSync(release, { force: true });
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
