// A file whose tests need no cycle of its cell (harness/fixture.ts cycleFree) gets its stack on the stepped
// clock from the sim target, unless the run's `hil serve` arguments chose a clock; every other file, and
// every variant, keeps the clock it had.

import { afterEach, describe, expect, test } from 'vitest';
import { TARGETS } from './index.ts';
import { fileStart } from './sim.ts';
import type { Target } from './types.ts';

describe('fileStart', () => {
  const base = { args: ['--test-channel', '--machine', '/m.json'] };
  test('a cycle-free file: the stepped clock after the file target\'s own arguments', () => {
    expect(fileStart(base, { fileClock: 'stepped' }).args).toEqual(['--test-channel', '--machine', '/m.json', '--clock', 'stepped']);
    expect(fileStart(base, { fileClock: 'stepped', serveArgs: ['--driver', 'ethercat-fake'] }).args).toEqual([...base.args, '--clock', 'stepped']);
  });
  test('any other file keeps its start', () => {
    expect(fileStart(base, {})).toBe(base);
    expect(fileStart(base, { serveArgs: [] })).toBe(base);
  });
  test('a clock the run chose in its hil serve arguments wins', () => {
    expect(fileStart(base, { fileClock: 'stepped', serveArgs: ['--clock', 'fast', '--speed', '2'] })).toBe(base);
    expect(fileStart(base, { fileClock: 'stepped', serveArgs: ['--clock=realtime'] })).toBe(base);
  });
});

describe('the sim target', () => {
  const open: Target[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((t) => t.close()));
  });
  async function clockOf(t: Target): Promise<unknown> {
    const r = await t.client().describe();
    expect(r.status).toBe(200);
    return (r.reply.data as { clock?: unknown }).clock;
  }
  async function opened(fileClock: 'stepped' | undefined): Promise<Target> {
    const t = await TARGETS.sim.open({ ...TARGETS.sim.parse({}), ...(fileClock ? { fileClock } : {}) });
    open.push(t);
    return t;
  }
  test('starts a cycle-free file\'s stack on the stepped clock, and any other file\'s on the real-time clock', { timeout: 120_000 }, async () => {
    expect(await clockOf(await opened('stepped'))).toBe('stepped');
    expect(await clockOf(await opened(undefined))).toBe('realtime');
  });
  test('a restarted service keeps the file\'s clock; a variant of the file\'s target asks for its own', { timeout: 120_000 }, async () => {
    const t = await opened('stepped');
    await t.restartService();
    expect(await clockOf(t)).toBe('stepped');
    const v = await t.variant({ telemetry: 'off' });
    open.push(v);
    expect(await clockOf(v)).toBe('realtime');
  });
});
