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
