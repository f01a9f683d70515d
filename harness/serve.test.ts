// `hil serve` as a service manager runs it: started in a process group of its own, stopped by SIGTERM to
// every process of the group (systemd's default KillMode, a container runtime's stop). The stack must stop
// the same orderly way as when only `hil serve` is signalled: open remote jog connections closed with 1001
// and the listener's grace kept (docs/profile.md remote jog shutdown), "stopped" reported, its sockets
// removed, exit status 0. A second signal during that grace does not cut it short; a third may (and does:
// it exits at once, 143). The same `hil serve` sends no TLS session tickets (document 1 part 5), counted
// with openssl s_client when openssl is installed.
//
// `hil serve --olp-port` starts the whole OLP server beside the stack (README "The offline programming
// server"): the reference STEP worker, the local simulator and a program store, not routes answering
// unavailable.

import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { clientFiles, createPair, issueClient } from './certs.ts';
import { Cell } from './clients/cell.ts';
import { ControlClient, type BindingInput } from './clients/control.ts';
import { RemoteJogSocket, type CloseInfo } from './clients/jog.ts';
import { sealProgram } from './clients/weldplan.ts';
import { parseExact, stringifyExact, type JsonObject } from './oracle/json.ts';
import { PREBUILT_ENV, prebuildReference, type Prebuilt } from './targets/reference.ts';

const HIL = join(import.meta.dirname, 'bin', 'hil.mjs');

interface Served {
  child: ChildProcess;
  dir: string;
  control: string;
  port: number;
  pairDir: string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  ready: Record<string, unknown>;
}

// Every hil serve of this file starts its stack (and the stack its workers, planner and OLP server) from one
// bundle built here (harness/targets/reference.ts, as a conformance run does), not each through tsx's loader.
// A bundle the environment already names (hil test's own, say) is used as it is.
let built: Prebuilt | undefined;
beforeAll(async () => {
  if (process.env[PREBUILT_ENV]) return;
  built = await prebuildReference();
  process.env[PREBUILT_ENV] = built.dir;
}, 120_000);
afterAll(async () => {
  if (!built) return;
  delete process.env[PREBUILT_ENV];
  await built.remove();
});

const started: Served[] = [];
afterEach(async () => {
  for (const s of started.splice(0)) {
    // A failed test may leave the group running: end it (by its own process group id).
    if (s.child && s.child.exitCode === null && s.child.signalCode === null) {
      try {
        process.kill(-s.child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await s.exited;
    }
    await rm(s.dir, { recursive: true, force: true });
  }
});

/** `hil serve` with a remote listener, in a process group of its own (detached), once it is ready. */
async function serve(): Promise<Served> {
  const dir = await mkdtemp(join(tmpdir(), 'hil-serve-'));
  const pair = await createPair({ dir: join(dir, 'pair'), pairId: 'cell-serve-01' });
  await issueClient({ dir: pair.dir, principal: 'operator-1' });
  const s = await spawnServe(dir, ['--remote-listen', '127.0.0.1:0', '--remote-ca', pair.ca, '--remote-cert', pair.cert, '--remote-key', pair.key, '--remote-crl', pair.crl, '--pair-id', 'cell-serve-01']);
  s.pairDir = pair.dir;
  s.port = Number(/:([0-9]+)$/.exec(s.ready.remote as string)![1]);
  return s;
}

/**
 * `hil serve --socket-dir DIR/sock` with these flags, in a process group of its own (detached), once it is
 * ready; with `umask`, started from a shell that set that umask first.
 */
async function spawnServe(dir: string, flags: string[], o: { umask?: string } = {}): Promise<Served> {
  const argv = [HIL, 'serve', '--socket-dir', join(dir, 'sock'), ...flags];
  const child =
    o.umask === undefined
      ? spawn(process.execPath, argv, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('/bin/sh', ['-c', `umask ${o.umask} && exec "$0" "$@"`, process.execPath, ...argv], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('exit', (code, signal) => r({ code, signal })));
  const s: Served = { child, dir, control: '', port: 0, pairDir: '', stderr: () => err, exited, ready: {} };
  started.push(s);
  s.ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`hil serve did not report ready within 25 s\n${err}`)), 25_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('ready '));
      if (line) {
        clearTimeout(t);
        resolve(JSON.parse(line.slice('ready '.length)) as Record<string, unknown>);
      }
    });
    void exited.then(() => reject(new Error(`hil serve exited before ready\n${err}`)));
  });
  s.control = s.ready.control as string;
  return s;
}

/** A remote controller holding the grant with a remote jog connection open (so the stop has its grace). */
async function openRemoteJog(s: Served): Promise<{ ws: RemoteJogSocket; client: ControlClient; cell: Cell }> {
  const f = clientFiles(s.pairDir, 'operator-1');
  const creds = { host: '127.0.0.1', port: s.port, cert: await readFile(f.cert, 'utf8'), key: await readFile(f.key, 'utf8'), ca: await readFile(join(s.pairDir, 'ca.crt'), 'utf8') };
  const client = ControlClient.https({ origin: `https://127.0.0.1:${s.port}`, cert: creds.cert, key: creds.key, ca: creds.ca });
  const d = (await client.describe()).reply.data as unknown as { binding: BindingInput };
  const cell = new Cell(client, d.binding);
  const g = await cell.grant({ requested_lease_ms: 10_000n });
  const ws = await RemoteJogSocket.open(creds, { session: g.session, generation: g.generation, jogGeneration: 0n });
  return { ws, client, cell };
}

/**
 * NewSessionTicket messages one TLS 1.3 exchange with openssl s_client got, with whether it was served
 * (HTTP 200), or null without openssl on this machine (then the check is left out, said in the title).
 */
function countTickets(s: Served): Promise<{ served: boolean; tickets: number } | null> {
  const f = clientFiles(s.pairDir, 'operator-1');
  return new Promise((resolve) => {
    let text = '';
    const p = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${s.port}`, '-tls1_3', '-msg', '-CAfile', join(s.pairDir, 'ca.crt'), '-cert', f.cert, '-key', f.key, '-verify_return_error', '-ign_eof'], { stdio: ['pipe', 'pipe', 'pipe'] });
    p.stdout.setEncoding('latin1').on('data', (d: string) => (text += d));
    p.stderr.setEncoding('latin1').on('data', (d: string) => (text += d));
    const t = setTimeout(() => p.kill(), 15_000);
    p.on('error', () => resolve(null));
    p.on('exit', () => {
      clearTimeout(t);
      resolve({ served: text.includes('HTTP/1.1 200'), tickets: (text.match(/NewSessionTicket/g) ?? []).length });
    });
    p.stdin.end('GET /v1/describe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  });
}

const group = (s: Served, sig: NodeJS.Signals) => process.kill(-s.child.pid!, sig);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('hil serve stopped by SIGTERM to its whole process group', () => {
  test('its remote listener sends no TLS session ticket (openssl s_client -msg); one SIGTERM to the group, and a second during the grace: orderly stop (1001 to the remote jog connection, stopped once, sockets removed, status 0)', async ({ annotate }) => {
    const s = await serve();
    const tickets = await countTickets(s);
    if (tickets !== null) expect(tickets).toEqual({ served: true, tickets: 0 });
    else await annotate('openssl is not installed: the real-client ticket count was left out');
    const { ws, client } = await openRemoteJog(s);
    const closed: Promise<CloseInfo> = ws.closed;
    group(s, 'SIGTERM');
    expect((await closed).code).toBe(1001);
    // Within the remote listener's shutdown grace (2 s after the jog connections closed): once more.
    await sleep(400);
    expect(s.child.exitCode).toBe(null);
    group(s, 'SIGTERM');
    const end = await s.exited;
    await client.close();
    expect({ end, stopped: s.stderr().match(/hil serve: stopped \(SIGTERM\)/g)?.length ?? 0 }).toEqual({ end: { code: 0, signal: null }, stopped: 1 });
    expect(s.stderr()).toMatch(/signal again while stopping/);
    expect(existsSync(s.control)).toBe(false);
  }, 60_000);

  test('a third signal during the grace ends it at once (status 143, no "stopped")', async () => {
    const s = await serve();
    const { ws, client } = await openRemoteJog(s);
    group(s, 'SIGTERM');
    expect((await ws.closed).code).toBe(1001);
    await sleep(300);
    group(s, 'SIGTERM');
    await sleep(300);
    expect(s.child.exitCode).toBe(null);
    group(s, 'SIGTERM');
    const end = await s.exited;
    await client.close();
    expect(end).toEqual({ code: 143, signal: null });
    expect(s.stderr()).toMatch(/third signal: exiting now/);
    expect(s.stderr()).not.toMatch(/hil serve: stopped/);
  }, 60_000);
});

describe('hil serve --olp-port', () => {
  const BASE = '/api/offline-programming/v1';
  const FILLET = readFileSync(join(import.meta.dirname, '..', 'fixtures', 'step', 'fillet-joint.step'));
  const PROGRAM = join(import.meta.dirname, '..', 'fixtures', 'weldplans', 'line-weld.program.json');

  test('starts the whole OLP server: extract_topology on the fillet fixture by the STEP worker, a program put, listed and read back byte for byte from the temporary store, the local simulator configured; the store is removed at stop', async () => {
    const s = await spawnServe(await mkdtemp(join(tmpdir(), 'hil-serve-')), ['--olp-port', '0']);
    const olp = String(s.ready.olp) + BASE;
    const store = String(s.ready.olp_programs);
    expect(existsSync(store)).toBe(true);
    const health = (await (await fetch(olp + '/health')).json()) as Record<string, unknown>;
    expect({ local_simulator: health.local_simulator, program_catalog: health.program_catalog }).toEqual({ local_simulator: true, program_catalog: true });

    const topo = await fetch(olp + '/cadquery/topology', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operation: 'extract_topology', step_base64: FILLET.toString('base64') }) });
    const topoText = await topo.text();
    expect(topo.status, topoText.slice(0, 300)).toBe(200);
    const solids = (JSON.parse(topoText) as { result: { solids: Array<{ id: string; faces: unknown[]; edges: unknown[] }> } }).result.solids;
    expect(solids.map((x) => [x.id, x.faces.length, x.edges.length])).toEqual([['solid-0', 6, 12], ['solid-1', 6, 12]]);

    const doc = sealProgram(parseExact(readFileSync(PROGRAM)) as JsonObject) as Record<string, unknown>;
    const id = String(doc.program_id);
    const bytes = stringifyExact(doc);
    const put = await fetch(`${olp}/programs/${id}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: bytes });
    const putText = await put.text();
    expect(put.status, putText).toBe(200);
    expect(JSON.parse(putText)).toMatchObject({ ok: true, program_id: id, program_digest: doc.program_digest, created: true });
    const list = (await (await fetch(olp + '/programs')).json()) as { programs: Array<{ program_id: string; program_digest: string }> };
    expect(list.programs.map((p) => [p.program_id, p.program_digest])).toEqual([[id, doc.program_digest]]);
    const got = await fetch(`${olp}/programs/${id}`);
    expect([got.status, await got.text()]).toEqual([200, bytes]);
    expect(readdirSync(store).length).toBeGreaterThan(0);

    group(s, 'SIGTERM');
    expect(await s.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(store)).toBe(false);
  }, 60_000);

  test('an --olp-* flag without --olp-port, and a value the OLP server refuses, are usage errors (status 2)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hil-serve-'));
    started.push({ dir } as Served);
    const run = (flags: string[]) =>
      new Promise<{ code: number | null; err: string }>((resolve) => {
        const c = spawn(process.execPath, [HIL, 'serve', '--socket-dir', join(dir, 'sock'), ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        c.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
        c.on('exit', (code) => resolve({ code, err }));
      });
    const stray = await run(['--olp-worker-pool', '2']);
    expect(stray).toEqual({ code: 2, err: 'hil serve: --olp-worker-pool needs --olp-port\n' });
    const refused = await run(['--olp-port', '0', '--olp-worker-pool', 'many']);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/^--worker-pool must be a positive integer$/m);
  }, 60_000);
});

/** Every process below `pid` (children, their children ...), read from /proc. */
function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // ended meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of parent) if (pp === p) (out.push(c), walk(c));
  };
  walk(pid);
  return out;
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A second `hil serve` on DIR/sock, run to its end: its status and what it wrote on stderr. */
function serveToEnd(dir: string): Promise<{ code: number | null; err: string }> {
  return new Promise((resolve) => {
    // In a group of its own: one that wrongly starts serving is ended, with its stack, after 30 s.
    const c = spawn(process.execPath, [HIL, 'serve', '--socket-dir', join(dir, 'sock')], { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const t = setTimeout(() => process.kill(-c.pid!, 'SIGKILL'), 30_000);
    c.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, err });
    });
  });
}

describe('hil serve owns its socket directory (document 1 part 1: file permissions are the authentication)', () => {
  test('a second hil serve on the same socket directory is refused (status 3, one clear line) and leaves the first one\'s sockets serving; the first one\'s stop frees the directory', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hil-serve-'));
    const a = await spawnServe(dir, []);
    const second = await serveToEnd(dir);
    expect(second.code).toBe(3);
    expect(second.err.split('\n')[0]).toBe(`hil serve: cannot start: socket directory ${join(dir, 'sock')} is served by another hil serve (pid ${a.ready.pid}); stop it first or give another --socket-dir`);
    // The first one's sockets are still there and it still answers on them.
    for (const f of ['control.sock', 'jog.sock', 'public/control.sock']) expect(existsSync(join(dir, 'sock', f)), f).toBe(true);
    const client = new ControlClient(a.control);
    try {
      expect((await client.describe()).status).toBe(200);
    } finally {
      await client.close();
    }
    group(a, 'SIGTERM');
    expect(await a.exited).toEqual({ code: 0, signal: null });
    expect(readdirSync(join(dir, 'sock'))).toEqual([]); // sockets, link and lock removed
    // A lock left by an owner that is gone (here: a pid no process has) is stale and taken over.
    writeFileSync(join(dir, 'sock', 'serve.lock'), '2147483646 1\n');
    const b = await spawnServe(dir, []);
    expect(readFileSync(join(dir, 'sock', 'serve.lock'), 'latin1').split(' ')[0]).toBe(String(b.ready.pid));
    group(b, 'SIGTERM');
    expect(await b.exited).toEqual({ code: 0, signal: null });
    // A lock whose pid is alive but started at another time (the pid was reused after a crash or a reboot:
    // here this test's own process, with a start time it does not have) is stale too; a start that only
    // asks whether the pid exists would refuse it for ever.
    writeFileSync(join(dir, 'sock', 'serve.lock'), `${process.pid} 1\n`);
    const c = await spawnServe(dir, []);
    expect(readFileSync(join(dir, 'sock', 'serve.lock'), 'latin1').split(' ')[0]).toBe(String(c.ready.pid));
    group(c, 'SIGTERM');
    expect(await c.exited).toEqual({ code: 0, signal: null });
  }, 120_000);

  test('kill -9 of hil serve ends everything it started: the stack (service and core), its planner and its OLP server and their workers; the stack stops the orderly way (sockets removed)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hil-serve-'));
    const s = await spawnServe(dir, ['--planner-port', '0', '--olp-port', '0']);
    const below = descendants(s.child.pid!);
    for (const p of [s.ready.pid, s.ready.planner_pid, s.ready.olp_pid]) expect(below, String(p)).toContain(p);
    process.kill(s.child.pid!, 'SIGKILL'); // hil serve alone, not its group
    await s.exited;
    const deadline = performance.now() + 30_000;
    while (below.some(running) && performance.now() < deadline) await sleep(100);
    const left = below.filter(running);
    for (const p of left) process.kill(p, 'SIGKILL'); // what a failed run left must not outlive the test
    expect(left).toEqual([]);
    expect(existsSync(join(dir, 'sock', 'control.sock'))).toBe(false);
    expect(existsSync(join(dir, 'sock', 'serve.lock'))).toBe(false);
  }, 90_000);

  for (const umask of ['000', '022']) {
    test(`under umask ${umask} the service sets its own modes: socket directory and public/ 0750, control.sock and jog.sock 0660, private/ 0700 and test.sock 0600`, async () => {
      const dir = await mkdtemp(join(tmpdir(), 'hil-serve-'));
      const s = await spawnServe(dir, ['--test-channel'], { umask });
      const mode = (f: string) => (statSync(join(dir, 'sock', f)).mode & 0o7777).toString(8).padStart(4, '0');
      expect(Object.fromEntries(['.', 'public', 'control.sock', 'jog.sock', 'private', 'private/test.sock', 'serve.lock'].map((f) => [f, mode(f)]))).toEqual({
        '.': '0750',
        public: '0750',
        'control.sock': '0660',
        'jog.sock': '0660',
        private: '0700',
        'private/test.sock': '0600',
        'serve.lock': '0640',
      });
      group(s, 'SIGTERM');
      expect(await s.exited).toEqual({ code: 0, signal: null });
    }, 90_000);
  }

  test('a socket directory any user may write (sticky or world-writable, like /tmp) is refused: anyone could replace the sockets', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hil-serve-'));
    started.push({ dir } as Served);
    mkdirSync(join(dir, 'sock'));
    chmodSync(join(dir, 'sock'), 0o1777);
    const r = await serveToEnd(dir);
    expect(r.code).toBe(3);
    expect(r.err.split('\n')[0]).toBe(`hil serve: cannot start: socket directory ${join(dir, 'sock')} may be written by any user (mode 1777): give the service a directory of its own`);
    expect(readdirSync(join(dir, 'sock'))).toEqual([]);
  }, 60_000);
});
