// The run's stack hosts (host-broker.ts), shared by its workers through HIL_HOST_BROKER: sessions open at
// once run in hosts of their own and the hosts are reused after; a refused start answers its status and
// reason; a worker that goes away mid-session has its session stopped; a session runs at the nice value
// it was asked at; warming starts hosts per worker once; closing the broker ends every host.

import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { ControlClient } from '../clients/control.ts';
import { HarnessError } from '../errors.ts';
import { startBroker, type HostBroker } from './host-broker.ts';
import { startStack } from './sim.ts';
import { BROKER_ENV, type BrokerReply } from './stack-host.ts';
import type { StackProcess } from './types.ts';

let broker: HostBroker;
beforeAll(async () => {
  broker = await startBroker();
  process.env[BROKER_ENV] = broker.path;
});
afterAll(async () => {
  delete process.env[BROKER_ENV];
  await broker.close();
});

const open: StackProcess[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.stop()));
});

async function hosted(args: string[] = []): Promise<StackProcess> {
  const s = await startStack({ args: ['--test-channel', ...args], hosted: true });
  open.push(s);
  return s;
}

async function incarnation(address: string): Promise<string | undefined> {
  const c = new ControlClient(address);
  try {
    const r = await c.describe();
    return r.status === 200 ? (r.reply.data as { adapter_incarnation: string }).adapter_incarnation : undefined;
  } catch {
    return undefined;
  } finally {
    await c.close();
  }
}

/** The nice value of a process's main thread (/proc/PID/stat field 19). */
function niceOf(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]);
}

/** A session asked for over a connection of its own, as a worker asks (stack-host.ts BrokerRequest). */
function rawSession(nice: number): Promise<{ ready: { pid: number; control: string }; sock: ReturnType<typeof connect>; replies: BrokerReply[] }> {
  return new Promise((resolve, reject) => {
    const sock = connect(broker.path);
    const replies: BrokerReply[] = [];
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('error', reject);
    sock.on('data', (d: string) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const r = JSON.parse(buf.slice(0, nl)) as BrokerReply;
        buf = buf.slice(nl + 1);
        replies.push(r);
        if (r.t === 'ready') resolve({ ready: r.ready as { pid: number; control: string }, sock, replies });
        else if (r.t === 'exited' || r.t === 'failed') reject(new Error(JSON.stringify(r)));
      }
    });
    const dir = `/tmp/hil-broker-test-${process.pid}-${Math.random().toString(16).slice(2)}`;
    sock.write(`${JSON.stringify({ t: 'start', args: ['--socket-dir', dir, '--test-channel'], env: process.env, own: {}, nice, timeoutMs: 60_000 })}\n`);
  });
}

test('two sessions open at once run in two of the run\'s hosts, each a stack of its own; stopped, their hosts serve the next two', async () => {
  const [a, b] = await Promise.all([hosted(), hosted()]);
  expect(a.ready.pid).not.toBe(b.ready.pid);
  const [ia, ib] = await Promise.all([incarnation(a.ready.control), incarnation(b.ready.control)]);
  expect(ia).toMatch(/^[0-9a-f]{32}$/);
  expect(ib).toMatch(/^[0-9a-f]{32}$/);
  expect(ia).not.toBe(ib);
  const hosts = broker.hosts;
  await Promise.all(open.splice(0).map((s) => s.stop()));
  expect(await incarnation(a.ready.control)).toBeUndefined();
  const [c, d] = await Promise.all([hosted(), hosted()]);
  expect([c.ready.pid, d.ready.pid].sort()).toEqual([a.ready.pid, b.ready.pid].sort());
  expect(broker.hosts).toBe(hosts);
  expect(await incarnation(c.ready.control)).not.toBe(ia);
});

test('a refused start rejects with the stack\'s status and its reason on standard error; the host serves the next session', async () => {
  const first = await hosted();
  const pid = first.ready.pid;
  await open.splice(0)[0]!.stop();
  const refused = await startStack({ args: ['--clock', 'sundial'], hosted: true }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(refused).toBeInstanceOf(HarnessError);
  expect((refused as HarnessError).code).toBe('HIL_ERR_TARGET_START');
  expect((refused as HarnessError).detail).toMatchObject({ exit_code: 2 });
  expect((refused as HarnessError).message).toContain('--clock sundial: expected realtime, fast or stepped');
  const next = await hosted();
  expect(next.ready.pid).toBe(pid);
});

test('a worker that closes its connection mid-session has the session stopped, and the host serves again', async () => {
  const s = await rawSession(0);
  expect(await incarnation(s.ready.control)).toMatch(/^[0-9a-f]{32}$/);
  s.sock.destroy();
  let up = true;
  for (let k = 0; k < 500 && up; k++) {
    up = (await incarnation(s.ready.control)) !== undefined;
    if (up) await new Promise((r) => setTimeout(r, 10));
  }
  expect(up).toBe(false);
  // Every host is idle again: as many sessions as there are hosts open without a new one.
  const hosts = broker.hosts;
  const again = await Promise.all(Array.from({ length: hosts }, () => hosted()));
  expect(again.map((x) => x.ready.pid)).toContain(s.ready.pid);
  expect(broker.hosts).toBe(hosts);
});

test('a session runs at the nice value it was asked at, in a host moved there or started there', async () => {
  const seven = await rawSession(7);
  expect(niceOf(seven.ready.pid)).toBe(7);
  const stopped = new Promise<void>((r) => seven.sock.once('close', () => r()));
  seven.sock.end(`${JSON.stringify({ t: 'stop' })}\n`);
  await stopped;
  const three = await rawSession(3);
  try {
    // Lowering a value needs privilege: without it a host at 7 stays idle and another serves at 3.
    expect(niceOf(three.ready.pid)).toBe(3);
  } finally {
    three.sock.destroy();
  }
});

test('warming starts the asked number of idle hosts once per worker that asks', async () => {
  const warm = async (worker: number) => {
    const sock = connect(broker.path);
    await new Promise<void>((r) => sock.end(`${JSON.stringify({ t: 'warm', count: 2, env: process.env, nice: 0, worker })}\n`, () => r()));
    await new Promise<void>((r) => sock.once('close', () => r()));
  };
  const before = broker.hosts;
  await warm(1_000_001);
  await new Promise((r) => setTimeout(r, 100));
  const once = broker.hosts;
  await warm(1_000_001);
  await new Promise((r) => setTimeout(r, 100));
  expect(broker.hosts).toBe(once);
  await warm(1_000_002);
  await new Promise((r) => setTimeout(r, 100));
  expect(broker.hosts - once).toBe(2);
  expect(once).toBeGreaterThanOrEqual(before);
});

test('closing the broker ends every host it started', async () => {
  const own = await startBroker();
  const saved = process.env[BROKER_ENV];
  process.env[BROKER_ENV] = own.path;
  let pid: number;
  try {
    const s = await startStack({ args: ['--test-channel'], hosted: true });
    pid = s.ready.pid;
    await s.stop();
  } finally {
    process.env[BROKER_ENV] = saved;
  }
  await own.close();
  let alive = true;
  for (let k = 0; k < 500 && alive; k++) {
    try {
      process.kill(pid, 0);
      await new Promise((r) => setTimeout(r, 10));
    } catch {
      alive = false;
    }
  }
  expect(alive).toBe(false);
});
