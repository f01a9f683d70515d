// `hil replay FILE` (standalone.ts): a recording replayed on its own clock. A lease is a deadline in host
// time; replayed later on the replaying machine's clock it has long run out, so the core would refuse what
// it accepted when recorded. On the recording's clock, with each request's recorded host time, it does not.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { CoreHost } from '../core/host.ts';
import type { FromCore } from '../core/protocol.ts';
import { nineAxisMachine } from '../core/test-machine.ts';
import { replayRecording } from './standalone.ts';

const MACHINE = nineAxisMachine();
const ALL = (1 << MACHINE.axes.length) - 1;
const DIR = mkdtempSync(join(tmpdir(), 'hil-standalone-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

test('a session recorded on the host clock under a lease replays without divergence after its deadline has passed on the replaying clock', async () => {
  const file = join(DIR, 'lease.hilrec');
  const sent: FromCore[] = [];
  const rec = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, captureRetentionMs: 0, record: { path: file, run: 'lease' } }, (m) => sent.push(m));
  // A lease of 150 ms from now; the enable comes within it and moves the drives.
  rec.handle({ t: 'grant', generation: 7n, deadlineNs: process.hrtime.bigint() + 150_000_000n, active: true, axisMask: ALL });
  for (let c = 0; c < 3; c++) rec.cycle();
  rec.handle({ t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL });
  for (let c = 0; c < 30; c++) rec.cycle();
  await rec.close();
  expect(sent.find((m) => m.t === 'reply' && m.id === 1)).toMatchObject({ result: { Result: 0 } });
  // Replayed after the lease's deadline has passed on this machine's clock.
  await new Promise((r) => setTimeout(r, 200));
  const { out } = await replayRecording(file, MACHINE, 'strict');
  expect(out).toMatchObject({ cycles: 33, divergence: null });
});

test('a jog session recorded on the stepped clock (begin_jog, jog.sock frames) replays without divergence: the frames\' bigint fields are read back as bigints', async () => {
  const file = join(DIR, 'jog.hilrec');
  const rec = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path: file, run: 'jog' } }, () => undefined);
  const host = () => rec.core.hostNow();
  rec.handle({ t: 'grant', generation: 7n, deadlineNs: host() + 60_000_000_000n, active: true, axisMask: ALL });
  rec.handle({ t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL });
  rec.step(20);
  rec.handle({ t: 'cmd', id: 2, op: 'arm', generation: 7n, axisMask: 0 });
  rec.step(5);
  rec.handle({ t: 'cmd', id: 3, op: 'begin_jog', generation: 7n, axisMask: 1, jog: { originNs: host(), deadlineNs: host() + 10_000_000_000n } });
  const jogGeneration = rec.core.jog.generation;
  expect(jogGeneration).toBeGreaterThan(0n);
  for (let k = 1n; k <= 3n; k++) {
    rec.handle({ t: 'jog_update', generation: 7n, jogGeneration, sequence: k, captureNs: host(), inputDeadlineNs: host() + 10_000_000_000n, velocity: MACHINE.axes.map((_, i) => (i === 0 ? 0.2 : 0)) });
    rec.step(10);
  }
  const moved = rec.core.image.targetPosition[0]!;
  await rec.close();
  expect(moved).not.toBe(0); // the frames moved J1 when recorded
  const { scan, out } = await replayRecording(file, MACHINE, 'strict');
  const frame = scan.requests.find((q) => q.msg.t === 'jog_update')!.msg;
  expect([typeof frame.jogGeneration, typeof frame.sequence, typeof frame.captureNs, typeof frame.inputDeadlineNs]).toEqual(['bigint', 'bigint', 'bigint', 'bigint']);
  expect(typeof (scan.requests.find((q) => q.msg.op === 'begin_jog')!.msg.jog as { originNs: unknown }).originNs).toBe('bigint');
  expect(out).toMatchObject({ divergence: null });
  expect(out.cycles).toBe(scan.frames);
});

