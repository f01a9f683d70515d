// A shared target (external, rig) is one service for the whole run: after a test it ends the grants that
// test left behind, so the next test does not meet control_already_owned. Checked against the reference
// stack reached as an external target would be.

import { afterAll, beforeAll, expect, test } from 'vitest';
import { ControlClient, SessionLedger } from '../clients/control.ts';
import { SharedClients } from './shared.ts';
import { externalTarget } from './external.ts';
import { startStack } from './sim.ts';
import { needsMotion } from '../fixture.ts';
import type { StackProcess, Target } from './types.ts';

let stack: StackProcess;
let target: Target;
let binding: never;

beforeAll(async () => {
  stack = await startStack({ args: [] });
  target = await externalTarget.open({ socket: stack.ready.control });
  binding = ((await target.client().describe()).reply.data as { binding: never }).binding;
});
afterAll(async () => {
  await target?.close();
  await stack?.stop();
});

const acquire = (c: ControlClient, controller: string, fields: Record<string, unknown> = {}) =>
  c.op('acquire', { controller, binding, ...fields });

test('a grant a test left held (no release, no stop) is ended by settle: the next acquire is granted', async () => {
  const left = target.client();
  const r = await acquire(left, 'left-behind');
  expect(r.status).toBe(200);
  // Without reconciliation the next test's controller meets the grant.
  const other = target.client();
  expect((await acquire(other, 'next-test')).label).toBe('control_already_owned');
  await target.settle!();
  const next = await acquire(other, 'next-test');
  expect(next.status).toBe(200);
  await target.settle!();
});

test('a grant whose end cannot be confirmed is waited out for its lease (and no longer than that)', async () => {
  const shared = new SharedClients(() => new ControlClient(stack.ready.control));
  // A session this service never issued: release and stop are refused, so the harness cannot know the
  // grant ended and leaves it to the lease.
  shared.ledger.note('acquire', 200, { session: 'f'.repeat(64), generation: 7n, lease_ms: 1_234n });
  const slept: number[] = [];
  expect(await shared.reconcile(async (ms) => void slept.push(ms))).toBe(0);
  expect(slept).toEqual([1_234 + 250]);
  // Nothing is left to reconcile.
  expect(await shared.reconcile(async (ms) => void slept.push(ms))).toBe(0);
  expect(slept).toHaveLength(1);
  await shared.close();
});

test('a released grant is forgotten, and nothing is sent for it at settle', () => {
  const l = new SessionLedger();
  const g = { session: 'a'.repeat(64), generation: 3n, lease_ms: 500n };
  l.note('acquire', 200, g);
  l.note('renew', 200, { ...g, generation: 4n });
  expect(l.take()).toEqual([{ session: g.session, generation: 4n, lease_ms: 500 }]);
  l.note('acquire', 200, g);
  l.note('release', 200, g);
  l.note('acquire', 409, g);
  expect(l.take()).toEqual([]);
  // A release answers a Grant with an empty session (or none): the request's session is the one released.
  l.note('acquire', 200, g);
  l.note('release', 200, { ...g, session: '' }, g.session);
  l.note('acquire', 200, { ...g, session: 'b'.repeat(64) });
  l.note('release', 200, { generation: 3n }, 'b'.repeat(64));
  expect(l.take()).toEqual([]);
});

test('a grant the test released through its client is not reconciled: settle sends nothing and waits for nothing', async () => {
  const shared = new SharedClients(() => new ControlClient(stack.ready.control));
  const c = shared.client();
  const r = await acquire(c, 'released-by-test');
  expect(r.status).toBe(200);
  const g = r.reply.data as { session: string; generation: bigint };
  expect((await c.op('release', { session: g.session, generation: g.generation })).status).toBe(200);
  const slept: number[] = [];
  expect(await shared.reconcile(async (ms) => void slept.push(ms))).toBe(0);
  expect(slept).toEqual([]);
  await shared.close();
});

test('the external target moves the cell only with --allow-motion, and says so when a motion test skips', async () => {
  const skipped = (t: Target) => {
    const calls: Array<[boolean, string | undefined]> = [];
    needsMotion({ skip: (c, note) => void calls.push([c, note]) }, t);
    return calls;
  };
  expect(target.abilities.motion).toBe(false);
  expect(skipped(target)).toEqual([[true, 'motion is not allowed on target external: run with --allow-motion when the cell behind the service may move']]);
  const moving = await externalTarget.open({ socket: stack.ready.control, allowMotion: true });
  try {
    expect(moving.abilities.motion).toBe(true);
    expect(skipped(moving)).toEqual([[false, 'motion is not allowed on target external: run with --allow-motion when the cell behind the service may move']]);
  } finally {
    await moving.close();
  }
});

test('--machine names the cell\'s configuration: taken when it describes the cell the service describes, a usage error when it does not', async () => {
  const fixture = (name: string) => new URL(`../../fixtures/machines/${name}.json`, import.meta.url).pathname;
  expect(externalTarget.check!({ socket: stack.ready.control, machine: '/nonexistent/cell.json' })).toBe('--machine /nonexistent/cell.json: no such file');
  expect(externalTarget.check!({ socket: stack.ready.control, machine: fixture('nine-axis') })).toBeUndefined();
  const same = await externalTarget.open({ socket: stack.ready.control, machine: fixture('nine-axis') });
  await same.close();
  // Another cell's file (two axes, not nine): its limits would be read as this cell's.
  const other = externalTarget.open({ socket: stack.ready.control, machine: fixture('bench-two-axis') });
  await expect(other).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_OPTION' });
  await expect(other).rejects.toThrow(/--machine .*bench-two-axis\.json does not describe the cell the service describes .*; the service describes 9 axes/);
  // The same cell on another link profile is another cell too.
  await expect(externalTarget.open({ socket: stack.ready.control, machine: fixture('nine-axis-internet') })).rejects.toMatchObject({ code: 'HIL_ERR_TARGET_OPTION' });
});

test('--service-pid names the service\'s processes on this host: their run-queue waits then count for timing judgments, the first is the target\'s pid; ids that are no process here are a usage error', async () => {
  const { lateness } = await import('../lateness.ts');
  const { tracked } = await import('./live.ts');
  expect(externalTarget.check!({ socket: stack.ready.control, servicePid: '12x' })).toBe('--service-pid 12x: process ids, comma-separated ("12x" is not one)');
  expect(externalTarget.check!({ socket: stack.ready.control, servicePid: `${stack.ready.pid},0` })).toBe(`--service-pid ${stack.ready.pid},0: process ids, comma-separated ("0" is not one)`);
  expect(externalTarget.check!({ socket: stack.ready.control, servicePid: '4000000000' })).toBe('--service-pid 4000000000: no process 4000000000 on this host');
  expect(externalTarget.check!({ socket: stack.ready.control, servicePid: `${stack.ready.pid},${process.pid}` })).toBeUndefined();
  // Without the option the external target names no process: nothing of this host counts for it.
  const plain = tracked(await externalTarget.open({ socket: stack.ready.control }));
  try {
    expect(plain.pid).toBeUndefined();
    expect(lateness.targetOnHost()).toBe(false);
  } finally {
    await plain.close();
  }
  const named = tracked(await externalTarget.open({ socket: stack.ready.control, servicePid: `${stack.ready.pid},${process.pid}` }));
  try {
    expect(named.pid).toBe(stack.ready.pid);
    expect(lateness.targetOnHost()).toBe(process.platform === 'linux');
  } finally {
    await named.close();
  }
  expect(lateness.targetOnHost()).toBe(false);
});

test('a file that opens no target of its own asks the run: sim always moves, external only with --allow-motion', async () => {
  const { vi } = await import('vitest');
  const { needsRunMotion } = await import('../fixture.ts');
  const asked = () => {
    const calls: Array<[boolean, string | undefined]> = [];
    needsRunMotion({ skip: (c, note) => void calls.push([c, note]) });
    return calls.map(([c]) => c);
  };
  try {
    vi.stubEnv('HIL_TARGET', 'sim');
    expect(asked()).toEqual([false]);
    vi.stubEnv('HIL_TARGET', 'external');
    vi.stubEnv('HIL_SOCKET', stack.ready.control);
    expect(asked()).toEqual([true]);
    vi.stubEnv('HIL_ALLOW_MOTION', '1');
    expect(asked()).toEqual([false]);
  } finally {
    vi.unstubAllEnvs();
  }
});
