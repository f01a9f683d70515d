// Verify mode (drivers/replay/driver.ts): a recording of the sim driver re-simulated input by input. One
// perturbed input value in a recording is reported at exactly its cycle, axis and field (expected: the
// recorded value, actual: what the sim gives), while strict replay, which feeds the recorded inputs to the
// core, cannot see it there. An unperturbed recording, with injected faults, verifies to its end.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import type { CompiledMachine } from '../../sims/config/types.ts';
import { CoreHost } from '../../sims/core/host.ts';
import type { ToCore } from '../../sims/core/protocol.ts';
import type { ReplayDriver } from './driver.ts';
import { AXIS_FIELDS, RecordingReader, RecordingWriter, type RecordingHeader } from './format.ts';
import { runReplay, scanRecording } from './session.ts';
import { nineAxisMachine } from '../../sims/core/test-machine.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-verify-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const HOMEABLE = MACHINE.axes.reduce((m, a, i) => (a.native_home ? m | (1 << i) : m), 0);
const CYCLES = 1200;
const SCRIPT: Array<[number, ToCore]> = [
  [5, { t: 'cmd', id: 1, op: 'enable', generation: 7n, axisMask: ALL }],
  [120, { t: 'cmd', id: 2, op: 'arm', generation: 7n, axisMask: 0 }],
  [300, { t: 'inject', id: 3, fault: { kind: 'drive_fault', axis: 5, errorCode: 0x2310 } }],
  [400, { t: 'inject', id: 4, fault: { kind: 'clear' } }],
  [450, { t: 'cmd', id: 5, op: 'reset_fault', generation: 7n, axisMask: 0 }],
  [700, { t: 'cmd', id: 6, op: 'home', generation: 7n, axisMask: HOMEABLE }],
];

async function record(file: string): Promise<void> {
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, driverParams: { homingNs: 150_000_000n }, record: { path: file } }, () => undefined);
  host.handle({ t: 'grant', generation: 7n, deadlineNs: 1n << 62n, active: true, axisMask: ALL });
  for (let c = 0; c < CYCLES; c++) {
    for (const [at, m] of SCRIPT) if (at === c) host.handle(m);
    host.cycle();
  }
  await host.close();
}

/** Copy a recording frame by frame (notes kept), changing one value at one frame. */
function perturb(from: string, to: string, frame: number, slot: number, by: number): { was: number } {
  const r = RecordingReader.open(from);
  const { format: _f, t0_ns, started_at: _s, ...header } = r.header as RecordingHeader;
  const w = new RecordingWriter(to, header);
  const t0 = BigInt(t0_ns);
  let was = 0;
  while (r.next()) {
    for (const n of r.takeNotes()) w.note(n);
    const v = Float64Array.from(r.values);
    if (r.frame === frame) {
      was = v[slot]!;
      v[slot] = was + by;
    }
    w.frame(v, r.rc, t0 + BigInt(r.t));
  }
  for (const n of r.takeNotes()) w.note(n);
  w.close();
  return { was };
}

async function replay(file: string, mode: string) {
  const host = await CoreHost.create({ machine: MACHINE, driver: 'replay', driverParams: { file, mode, reportFile: '' }, clock: { mode: 'stepped' }, captureRetentionMs: 0 }, () => undefined);
  const out = runReplay(host, scanRecording(file));
  await host.close();
  return { out, driver: host.driverHost.driver as ReplayDriver };
}

test('verify: an unperturbed recording (with an injected drive fault) re-simulates to its end without a difference', async () => {
  const file = join(DIR, 'base.hilrec');
  await record(file);
  expect(RecordingReader.open(file).header.driver_params).toEqual({ homingNs: '150000000' });
  const { out } = await replay(file, 'verify');
  expect(out).toMatchObject({ cycles: CYCLES, divergence: null });
});

test('one perturbed input value is reported at exactly that cycle, axis and field', async () => {
  const file = join(DIR, 'base2.hilrec');
  await record(file);
  const FRAME = 537;
  const AXIS = 4;
  const slot = AXIS_FIELDS.indexOf('positionActual') * N + AXIS;
  const bad = join(DIR, 'perturbed.hilrec');
  const { was } = perturb(file, bad, FRAME, slot, 3);
  const { out } = await replay(bad, 'verify');
  expect(out.divergence).toMatchObject({ kind: 'diverged', mode: 'verify', cycle: FRAME, axis: AXIS, axis_id: MACHINE.axes[AXIS]!.id, field: 'positionActual', expected: was + 3, actual: was });
  expect(out.cycles).toBe(FRAME);
  // another field and axis, to be sure the report follows the perturbation and not the recording
  const bad2 = join(DIR, 'perturbed2.hilrec');
  const slot2 = AXIS_FIELDS.indexOf('statusword') * N + 7;
  const p2 = perturb(file, bad2, 812, slot2, 0x4000);
  expect((await replay(bad2, 'verify')).out.divergence).toMatchObject({ cycle: 812, axis: 7, field: 'statusword', expected: p2.was + 0x4000, actual: p2.was });
  // strict replay feeds the recorded inputs to the core: the perturbed position is not a difference there
  const strict = await replay(bad, 'strict');
  expect(strict.out.divergence === null || strict.out.divergence.cycle > FRAME).toBe(true);
});
