// The replay driver end to end with the real core (a driver test may run its driver under sims/core: harness/import-rule.test.ts).
// The recording format and the replay driver: a fast-check round trip of the format, a killed writer's
// readable prefix, stale / missing / truncated recordings with their codes, and whole sessions recorded from
// the sim driver through CoreHost on the stepped clock and replayed: zero divergence with the same commands
// at the same cycles, and a changed command reported at the exact cycle, axis and field.

import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, expect, test } from 'vitest';
import type { CompiledMachine } from '../../sims/config/types.ts';
import { CoreHost } from '../../sims/core/host.ts';
import type { CommandResult, CoreStartOptions, FromCore, NativeOpName } from '../../sims/core/protocol.ts';
import { ProcessImage, type BusSetup } from '../bus.ts';
import { DriverHost } from '../host.ts';
import { createDriver } from '../index.ts';
import { createReplayDriver, REPLAY_RC, ReplayDriver } from './driver.ts';
import { AXIS_OUTPUTS, FORMAT_VERSION, RecordingError, RecordingReader, RecordingWriter, slotLayout, type RecordingNote } from './format.ts';
import { RecordingDriver } from './recorder.ts';
import { runReplay, scanRecording } from './session.ts';
import { fileURLToPath } from 'node:url';
import { nineAxisMachine } from '../../sims/core/test-machine.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-replay-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
let seq = 0;
const tmp = (name: string) => join(DIR, `${seq++}-${name}`);

const HEADER = { driver: 'sim', cycle_ns: '1000000', setup_sha256: 'x'.repeat(64) };

// Values as the image can hold them: u32 for the widest unsigned fields, i32 for the signed ones.
const value = fc.oneof(fc.integer({ min: -0x80000000, max: 0x7fffffff }), fc.integer({ min: 0, max: 0xffffffff }), fc.constantFrom(0, 1, -1));

test('format round trip: frames (values, return code, time) and notes read back exactly, in order', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 4 }).chain((axes) =>
        fc.record({
          axes: fc.constant(axes),
          frames: fc.array(
            fc.record({
              changes: fc.array(fc.tuple(fc.nat(slotLayout(axes).count - 1), value), { maxLength: 8 }),
              rc: fc.integer({ min: -3000, max: 5 }),
              dt: fc.integer({ min: 0, max: 5_000_000 }),
              note: fc.option(fc.record({ kind: fc.constantFrom('request' as const, 'reply' as const, 'event' as const), data: fc.jsonValue() }), { nil: undefined }),
            }),
            { minLength: 1, maxLength: 600 },
          ),
        }),
      ),
      ({ axes, frames }) => {
        const path = tmp('prop.hilrec');
        const w = new RecordingWriter(path, { ...HEADER, axisCount: axes });
        const v = new Float64Array(slotLayout(axes).count);
        const want: Array<{ v: number[]; rc: number; t: number; notes: RecordingNote[] }> = [];
        let t = 5_000_000_000n;
        let rel = 0;
        for (const [k, f] of frames.entries()) {
          for (const [s, x] of f.changes) v[s] = x;
          t += BigInt(f.dt);
          if (k > 0) rel += f.dt;
          w.frame(v, f.rc, k === 0 ? (t = 5_000_000_000n) : t);
          const notes: RecordingNote[] = f.note ? [{ cycle: k + 1, ...f.note }] : [];
          for (const n of notes) w.note(n);
          want.push({ v: [...v], rc: f.rc, t: rel, notes });
        }
        w.close();
        const r = RecordingReader.open(path);
        expect(r.header).toMatchObject({ format: FORMAT_VERSION, axisCount: axes, driver: 'sim', t0_ns: '5000000000' });
        let prevNotes: RecordingNote[] = [];
        for (const f of want) {
          expect(r.next()).toBe(true);
          expect(r.takeNotes()).toEqual(JSON.parse(JSON.stringify(prevNotes)));
          expect([...r.values]).toEqual(f.v);
          expect(r.rc).toBe(f.rc);
          expect(r.t).toBe(f.t);
          prevNotes = f.notes;
        }
        expect(r.next()).toBe(false);
        expect(r.takeNotes()).toEqual(JSON.parse(JSON.stringify(prevNotes)));
        expect(r.complete).toBe(true);
      },
    ),
    { numRuns: 60 },
  );
});

test('a killed writer leaves a readable prefix: every complete frame before the cut, marked incomplete', () => {
  const path = tmp('cut.hilrec');
  const axes = 9;
  const w = new RecordingWriter(path, { ...HEADER, axisCount: axes });
  const v = new Float64Array(slotLayout(axes).count);
  const N = 2000;
  for (let k = 1; k <= N; k++) {
    v[2 * axes + (k % axes)] = k * 37; // a target moves
    v[5 * axes + (k % axes)] = k * 11; // its position follows
    w.frame(v, 0, BigInt(k) * 1_000_000n);
  }
  w.flush(); // what a writer killed after its last block leaves: no end record
  const full = readFileSync(path);
  const sizes = [full.length, Math.floor(full.length * 0.75), Math.floor(full.length / 2), Math.floor(full.length / 5)];
  let lastFrames = Infinity;
  for (const size of sizes) {
    writeFileSync(path, full.subarray(0, size));
    const r = RecordingReader.open(path);
    let frames = 0;
    const check = new Float64Array(v.length);
    while (r.next()) {
      frames++;
      check[2 * axes + (frames % axes)] = frames * 37;
      check[5 * axes + (frames % axes)] = frames * 11;
      expect(r.values[2 * axes + (frames % axes)]).toBe(frames * 37);
    }
    expect([...r.values]).toEqual([...check].map((x, i) => (i < v.length ? x : 0)));
    expect(r.complete).toBe(false);
    expect(frames).toBeLessThanOrEqual(Math.min(N, lastFrames));
    if (size === full.length) expect(frames).toBe(N);
    else expect(frames).toBeLessThan(N);
    lastFrames = frames;
  }
  // A cut inside the first block leaves only the header's magic, or less: a hard error with its code.
  writeFileSync(path, full.subarray(0, 40));
  expect(() => RecordingReader.open(path)).toThrow(expect.objectContaining({ code: 'REPLAY_TRUNCATED' }));
  truncateSync(path, 0);
  expect(() => RecordingReader.open(path)).toThrow(expect.objectContaining({ code: 'REPLAY_TRUNCATED' }));
  expect(() => RecordingReader.open(join(DIR, 'absent.hilrec'))).toThrow(expect.objectContaining({ code: 'REPLAY_MISSING' }));
  writeFileSync(path, 'not gzip at all');
  expect(() => RecordingReader.open(path)).toThrow(expect.objectContaining({ code: 'REPLAY_BAD_FORMAT' }));
});

test('replay params are validated with REPLAY_BAD_PARAMS', () => {
  expect(() => createReplayDriver({})).toThrow(expect.objectContaining({ code: 'REPLAY_BAD_PARAMS' }));
  expect(() => createReplayDriver({ params: { file: 'x', mode: 'closed' } })).toThrow(expect.objectContaining({ code: 'REPLAY_BAD_PARAMS' }));
  expect(() => createReplayDriver({ params: { file: 'x', machine_sha256: 'ABC' } })).toThrow(expect.objectContaining({ code: 'REPLAY_BAD_PARAMS' }));
  expect(createReplayDriver({ params: { file: 'x', mode: 'closed-loop' } }).name).toBe('replay');
  expect(() => createReplayDriver({ params: { file: 'x', speed: 2 } })).toThrow(expect.objectContaining({ code: 'REPLAY_BAD_PARAMS' }));
  expect(createReplayDriver({ params: { file: 'x', mode: 'open-loop' } }).name).toBe('replay');
});

// ---- whole sessions through the core host on the stepped clock -------------------------------------------

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const HOMEABLE = MACHINE.axes.reduce((m, a, i) => (a.native_home ? m | (1 << i) : m), 0);
const FOREVER = 1n << 62n;

type Script = Array<[cycle: number, op: NativeOpName, mask: number]>;
const SCRIPT: Script = [
  [5, 'enable', ALL],
  [120, 'arm', 0],
  [400, 'stop', 0],
  [700, 'home', HOMEABLE],
];
const CYCLES = 1400;

/** Runs the script on a stepped core host; returns the replies in order and the host. */
async function session(script: Script, extra: Partial<CoreStartOptions>): Promise<{ host: CoreHost; replies: CommandResult[] }> {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, driverParams: { homingNs: 300_000_000n }, ...extra }, (m) => sent.push(m));
  host.handle({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
  let id = 1;
  for (let c = 0; c < CYCLES; c++) {
    for (const [at, op, axisMask] of script) if (at === c) host.handle({ t: 'cmd', id: id++, op, generation: 7n, axisMask });
    host.cycle();
  }
  const replies = sent.filter((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply').map((m) => m.result);
  await host.close();
  return { host, replies };
}

test('a session recorded from the sim driver replays in strict mode with zero divergence and the same replies', async () => {
  const file = tmp('session.hilrec');
  const rec = await session(SCRIPT, { record: { path: file, run: 'replay.test session' } });
  expect(rec.host.recorder?.frames).toBe(CYCLES);
  expect(rec.replies.map((r) => r.Result)).toEqual([0, 0, 0, 0]); // the script did something real
  const r = RecordingReader.open(file);
  expect(r.header).toMatchObject({ driver: 'sim', axisCount: N, machine_sha256: MACHINE.machine_sha256, configuration_sha256: MACHINE.configuration_sha256, run: 'replay.test session', package_version: '0.1.0', git_revision: expect.stringMatching(/^[0-9a-f]{40}$/) });
  // the session moved the outputs: controlwords and modes changed during it
  let outputChanges = 0;
  const prev = new Float64Array(r.values.length);
  while (r.next()) {
    for (let s = 0; s < AXIS_OUTPUTS * N; s++) if (r.values[s] !== prev[s]) outputChanges++;
    prev.set(r.values);
  }
  expect(outputChanges).toBeGreaterThan(2 * N);
  expect(r.complete).toBe(true);

  const rep = await session(SCRIPT, { driver: 'replay', driverParams: { file, mode: 'strict' } });
  const d = rep.host.driverHost.driver as ReplayDriver;
  expect(d.divergence()).toBeNull();
  expect(rep.host.driverHost.submissionFailures).toBe(0);
  expect(rep.replies).toEqual(rec.replies);
});

test('a drive whose PDO mapping differed at bring-up: the recording says so and the replay latches restart_required again, at cycle 0', async () => {
  const file = tmp('mismatch.hilrec');
  const events = (sent: FromCore[]) => sent.filter((m) => m.t === 'event' && m.type === 'fault_latched').map((m) => (m as { payload: unknown }).payload);
  const rec: FromCore[] = [];
  const a = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, driverParams: { startFaults: [{ kind: 'pdo_mapping_mismatch', axis: 3 }] }, record: { path: file } }, (m) => rec.push(m));
  for (let c = 0; c < 20; c++) a.cycle();
  await a.close();
  expect(RecordingReader.open(file).header.mapping_mismatch_mask).toBe(1 << 3);
  const rep: FromCore[] = [];
  const b = await CoreHost.create({ machine: MACHINE, driver: 'replay', clock: { mode: 'stepped' }, captureRetentionMs: 0, driverParams: { file, mode: 'strict' } }, (m) => rep.push(m));
  const atStart = events(rep);
  for (let c = 0; c < 20; c++) b.cycle();
  expect((b.driverHost.driver as ReplayDriver).divergence()).toBeNull();
  await b.close();
  expect(atStart).toEqual([{ bit: 2048, name: 'restart_required', axis_mask: 1 << 3, recovery: 'restart' }]);
  expect(events(rep)).toEqual(events(rec));
});

/** The first frame where the outputs of two recordings differ, found by reading both (the oracle). */
function firstOutputDifference(a: string, b: string): { cycle: number; axis: number; field: string; expected: number; actual: number } {
  const ra = RecordingReader.open(a);
  const rb = RecordingReader.open(b);
  const L = slotLayout(N);
  while (ra.next() && rb.next()) {
    for (let s = 0; s < L.count; s++) {
      if (L.isOutput(s) && ra.values[s] !== rb.values[s]) {
        const d = L.describe(s);
        return { cycle: ra.frame, axis: d.axis!, field: d.field, expected: ra.values[s]!, actual: rb.values[s]! };
      }
    }
  }
  throw new Error('no difference');
}

test('a changed command is reported at the exact cycle, axis and field, with the requests before it', async () => {
  const file = tmp('base.hilrec');
  await session(SCRIPT, { record: { path: file } });
  // The same session with axis 3 left out of the enable.
  const changed: Script = SCRIPT.map(([c, op, m]) => [c, op, op === 'enable' ? m & ~(1 << 3) : m]);
  const other = tmp('changed.hilrec');
  await session(changed, { record: { path: other } });
  const want = firstOutputDifference(file, other);
  expect(want).toMatchObject({ axis: 3, field: 'controlword' });
  expect(want.cycle).toBeGreaterThan(5);

  const reportFile = tmp('report.json');
  const rep = await session(changed, { driver: 'replay', driverParams: { file, reportFile } });
  const d = rep.host.driverHost.driver as ReplayDriver;
  const report = d.divergence();
  expect(report).toMatchObject({ kind: 'diverged', mode: 'strict', cycle: want.cycle, axis: 3, axis_id: MACHINE.axes[3]!.id, field: 'controlword', expected: want.expected, actual: want.actual });
  expect(report!.time_ns).toBe((want.cycle - 1) * Number(MACHINE.cycle_ns));
  // the enable request admitted before it is in the report, with the mask that was recorded
  const enable = report!.recent.find((n) => n.kind === 'request' && (n.data as { op?: string }).op === 'enable');
  expect(enable).toMatchObject({ cycle: 5, data: { op: 'enable', axisMask: ALL } });
  expect(JSON.parse(readFileSync(reportFile, 'utf8'))).toEqual(JSON.parse(JSON.stringify(report)));
  // the host saw the negative return and counted it; the core carried on without the bus
  expect(rep.host.driverHost.lastReturn).toBe(REPLAY_RC.diverged);
  expect(rep.host.driverHost.submissionFailures).toBe(CYCLES - want.cycle + 1);
});

const SETUP: BusSetup = {
  cycleNs: 1_000_000n,
  axes: [0, 1].map((i) => ({ index: i, id: `j${i + 1}`, slavePosition: i, countsPerUnit: 1000, sign: 1 as const, minPosition: -1, maxPosition: 1, maxVelocity: 1, followingError: 0.1 })),
  expectedMapping: [],
  ioOutputs: 0,
  ioInputs: 0,
};

async function recordBare(path: string, cycles: number, setup = SETUP, move = false): Promise<void> {
  const rec = new RecordingDriver(await createDriver('sim'), path);
  const h = new DriverHost(rec);
  await h.open(setup);
  h.activate();
  const img = new ProcessImage(setup.axes.length);
  for (let k = 1; k <= cycles; k++) {
    if (move) img.targetPosition[0] = (k * 7919) % 100_003; // outputs that change every cycle
    h.exchange(img, BigInt(k) * setup.cycleNs);
  }
  await h.close();
}

test('a recording for another bus setup is refused as stale, naming both digests', async () => {
  const file = tmp('stale.hilrec');
  await recordBare(file, 3);
  const recorded = RecordingReader.open(file).header.setup_sha256;
  const other: BusSetup = { ...SETUP, axes: SETUP.axes.map((a) => ({ ...a, followingError: 0.2 })) };
  const d = createReplayDriver({ params: { file } });
  const err = await d.open(other).then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(RecordingError);
  expect(err).toMatchObject({ code: 'REPLAY_STALE' });
  expect((err as Error).message).toContain(recorded);
  const { setupDigest } = await import('./format.ts');
  expect((err as Error).message).toContain(setupDigest(other));
  // through the driver host: the open fails and the cause keeps the code
  const h = new DriverHost(createReplayDriver({ params: { file } }));
  await expect(h.open(other)).rejects.toMatchObject({ code: 'DRIVER_OPEN_FAILED', cause: { code: 'REPLAY_STALE' } });
  await expect(new DriverHost(createReplayDriver({ params: { file: join(DIR, 'none.hilrec') } })).open(SETUP)).rejects.toMatchObject({ cause: { code: 'REPLAY_MISSING' } });
});

test('a truncated recording replays up to its last complete frame, then says where it ends', async () => {
  const file = tmp('trunc.hilrec');
  await recordBare(file, 999, SETUP, true);
  const full = readFileSync(file);
  writeFileSync(file, full.subarray(0, Math.floor(full.length * 0.6)));
  const r = RecordingReader.open(file);
  let frames = 0;
  while (r.next()) frames++;
  expect(r.complete).toBe(false);
  expect(frames).toBeGreaterThan(0);
  expect(frames).toBeLessThan(999);
  const d = createReplayDriver({ params: { file, mode: 'open-loop', reportFile: '' } }) as ReplayDriver;
  const h = new DriverHost(d);
  await h.open(SETUP);
  h.activate();
  const img = new ProcessImage(2);
  for (let k = 1; k <= frames; k++) expect(h.exchange(img, BigInt(k))).toBe(0);
  expect(h.exchange(img, 0n)).toBe(REPLAY_RC.end);
  expect(d.divergence()).toMatchObject({ kind: 'end', cycle: frames + 1, complete: false, mode: 'open-loop' });
  expect(h.exchange(img, 0n)).toBe(REPLAY_RC.end);
  // a complete recording says so at its end
  const whole = tmp('whole.hilrec');
  await recordBare(whole, 4);
  const d2 = createReplayDriver({ params: { file: whole, reportFile: '' } }) as ReplayDriver;
  await d2.open(SETUP);
  const img2 = new ProcessImage(2);
  for (let k = 0; k < 4; k++) expect(d2.exchange(img2, 0n)).toBe(0);
  expect(d2.exchange(img2, 0n)).toBe(REPLAY_RC.end);
  expect(d2.divergence()).toMatchObject({ kind: 'end', cycle: 5, complete: true });
});

test('open loop replays the inputs whatever the outputs; strict stops on the first changed output', async () => {
  const file = tmp('ol.hilrec');
  await recordBare(file, 10);
  const ol = createReplayDriver({ params: { file, mode: 'open-loop', reportFile: '' } }) as ReplayDriver;
  await ol.open(SETUP);
  const img = new ProcessImage(2);
  img.controlword[1] = 0x0f;
  for (let k = 0; k < 10; k++) expect(ol.exchange(img, 0n)).toBe(0);
  expect(img.online[0]).toBe(1);
  expect(ol.divergence()).toBeNull();
  const st = createReplayDriver({ params: { file, reportFile: '' } }) as ReplayDriver;
  await st.open(SETUP);
  const img2 = new ProcessImage(2);
  for (let k = 0; k < 3; k++) expect(st.exchange(img2, 0n)).toBe(0);
  img2.targetPosition[1] = -7;
  expect(st.exchange(img2, 0n)).toBe(REPLAY_RC.diverged);
  expect(st.divergence()).toMatchObject({ kind: 'diverged', cycle: 4, axis: 1, axis_id: 'j2', field: 'targetPosition', expected: 0, actual: -7 });
});

test('hil replay path: the recorded requests at their recorded cycles replay a session with zero divergence', async () => {
  const file = tmp('cli.hilrec');
  const rec = await session(SCRIPT, { record: { path: file, run: 'cli' } });
  const scan = scanRecording(file);
  // the grant (before the first cycle) and the four commands, at the cycles they arrived
  expect(scan.requests.map((r) => [r.cycle, r.msg.t, r.msg.op ?? null])).toEqual([[0, 'grant', null], ...SCRIPT.map(([c, op]) => [c, 'cmd', op])]);
  expect(scan.requests[0]!.msg.deadlineNs).toBe(FOREVER);
  expect(scan).toMatchObject({ frames: CYCLES, complete: true });
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'replay', driverParams: { file, reportFile: '' }, clock: { mode: 'stepped' }, captureRetentionMs: 0 }, (m) => sent.push(m));
  const out = runReplay(host, scan);
  await host.close();
  expect(out).toMatchObject({ cycles: CYCLES, frames: CYCLES, complete: true, divergence: null });
  expect(sent.filter((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply').map((m) => m.result)).toEqual(rec.replies);
  expect(host.driverHost.submissionFailures).toBe(0);

  // The stack's own subcommand, as `hil replay` starts it (a separate process; exit 0, the report on stdout).
  const { spawnSync } = await import('node:child_process');
  const entry = fileURLToPath(new URL('../../sims/main.ts', import.meta.url));
  const p = spawnSync(process.execPath, ['--import', 'tsx', entry, 'replay', file, '--config-cache', join(DIR, 'cache')], { encoding: 'utf8', timeout: 60_000 });
  expect(p.stderr).toBe('');
  expect(p.status).toBe(0);
  expect(JSON.parse(p.stdout)).toMatchObject({ mode: 'strict', cycles: CYCLES, recorded: { run: 'cli', frames: CYCLES, complete: true }, divergence: null });
  const bad = spawnSync(process.execPath, ['--import', 'tsx', entry, 'replay', join(DIR, 'nothing.hilrec'), '--config-cache', join(DIR, 'cache')], { encoding: 'utf8', timeout: 60_000 });
  expect(bad.status).toBe(2);
  expect(bad.stderr).toMatch(/^hil replay: REPLAY_MISSING: no recording at /);
});

test('a large plan taken in on the real-time clock (a share of each cycle\'s wall time) replays strictly, answered in the recorded cycle', async () => {
  const file = tmp('realtime-plan.hilrec');
  const n = 20_000; // 380000 element operations: taken in over cycles, not at once
  const timeNs = new BigInt64Array(n);
  for (let k = 0; k < n; k++) timeNs[k] = BigInt(k) * 1_000_000n;
  const plan = () => ({ t: 'prepare' as const, id: 2, generation: 7n, handle: 1n, axisMask: ALL, timeNs: timeNs.slice(), position: new Float64Array(n * N), velocity: new Float64Array(n * N), hasVelocity: new Uint8Array(n), ioMask: new Uint32Array(n), ioValues: new Uint32Array(n) });
  const answers = (sent: { cycle: number; m: FromCore }[]) => sent.filter((s) => s.m.t === 'reply' && s.m.id === 2).map((s) => [s.cycle, (s.m as Extract<FromCore, { t: 'reply' }>).result.Result]);

  const recSent: { cycle: number; m: FromCore }[] = [];
  let rec: CoreHost | undefined;
  rec = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'realtime', spinNs: 0 }, captureRetentionMs: 0, record: { path: file, run: 'realtime plan' } }, (m) => recSent.push({ cycle: rec?.core.cycleCount ?? 0, m }));
  rec.handle({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
  for (let c = 0; c < 3; c++) rec.cycle();
  const askedAt = rec.core.cycleCount;
  rec.handle(plan());
  for (let c = 0; c < 5000 && answers(recSent).length === 0; c++) rec.cycle();
  for (let c = 0; c < 5; c++) rec.cycle();
  await rec.close();
  const recorded = answers(recSent);
  expect(recorded).toHaveLength(1);
  expect(recorded[0]![1]).toBe(2); // prepared
  const answeredAt = recorded[0]![0]!;
  expect(answeredAt).toBeGreaterThan(askedAt); // taken in over cycles

  const scan = scanRecording(file);
  expect(scan.requests.find((q) => q.msg.t === 'prepare')?.answerAtCycle).toBe(answeredAt);
  const repSent: { cycle: number; m: FromCore }[] = [];
  let rep: CoreHost | undefined;
  rep = await CoreHost.create({ machine: MACHINE, driver: 'replay', driverParams: { file, reportFile: '' }, clock: { mode: 'stepped' }, captureRetentionMs: 0 }, (m) => repSent.push({ cycle: rep?.core.cycleCount ?? 0, m }));
  const out = runReplay(rep, scan);
  await rep.close();
  expect(out.divergence).toBeNull();
  expect(answers(repSent)).toEqual(recorded);
});
