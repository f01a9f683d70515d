// Property: record -> replay of random machine-operation sequences on the sim
// driver has no divergence. fast-check draws a sequence of native operations (grant changes, enable, arm,
// stop, halt, home, reset_fault, injected faults and clears) with random axis masks at random cycles; the
// session is recorded through CoreHost on the stepped clock and replayed strictly from its own recorded
// requests (the `hil replay` path): every cycle's outputs must equal the recorded ones, the replies and
// events must be the recorded ones, and the replay must reach the recording's end. A failing case prints
// its seed and path (fast-check), so it can be replayed.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, expect, test } from 'vitest';
import type { CompiledMachine } from '../../sims/config/types.ts';
import { CoreHost } from '../../sims/core/host.ts';
import type { FromCore, NativeOpName, ToCore } from '../../sims/core/protocol.ts';
import { runReplay, scanRecording } from './session.ts';
import { nineAxisMachine } from '../../sims/core/test-machine.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-replay-prop-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
let seq = 0;

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const FAR = 1n << 62n;

const OPS: NativeOpName[] = ['enable', 'arm', 'stop', 'halt', 'home', 'reset_fault'];
type Action = { gap: number } & ({ kind: 'cmd'; op: NativeOpName; mask: number } | { kind: 'grant'; active: boolean; generation: number } | { kind: 'inject'; fault: Record<string, unknown> } | { kind: 'clear' });

const mask = fc.oneof(fc.constant(0), fc.constant(ALL), fc.integer({ min: 0, max: ALL }));
const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ gap: fc.integer({ min: 0, max: 120 }), kind: fc.constant('cmd' as const), op: fc.constantFrom(...OPS), mask }) },
  { weight: 1, arbitrary: fc.record({ gap: fc.integer({ min: 0, max: 60 }), kind: fc.constant('grant' as const), active: fc.boolean(), generation: fc.integer({ min: 7, max: 9 }) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      gap: fc.integer({ min: 0, max: 60 }),
      kind: fc.constant('inject' as const),
      fault: fc.oneof(
        fc.record({ kind: fc.constant('following_error'), axis: fc.integer({ min: 0, max: N - 1 }) }),
        fc.record({ kind: fc.constant('drive_fault'), axis: fc.integer({ min: 0, max: N - 1 }), errorCode: fc.constantFrom(0x2310, 0x5530) }),
        fc.record({ kind: fc.constant('slave_offline'), axis: fc.integer({ min: 0, max: N - 1 }) }),
        fc.constant({ kind: 'estop_open' }),
        fc.constant({ kind: 'wkc_drop' }),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ gap: fc.integer({ min: 0, max: 60 }), kind: fc.constant('clear' as const) }) },
);

/** Run the actions on a fresh core (sim driver recorded, or replay of `file`); returns what it sent. */
async function record(actions: Action[], file: string): Promise<{ sent: FromCore[]; cycles: number }> {
  const sent: FromCore[] = [];
  const host = await CoreHost.create({ machine: MACHINE, driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, driverParams: { homingNs: 50_000_000n }, record: { path: file } }, (m) => sent.push(m));
  host.handle({ t: 'grant', generation: 7n, deadlineNs: FAR, active: true, axisMask: ALL });
  let id = 1;
  let gen = 7n;
  for (const a of actions) {
    for (let k = 0; k < a.gap; k++) host.cycle();
    let m: ToCore;
    if (a.kind === 'cmd') m = { t: 'cmd', id: id++, op: a.op, generation: gen, axisMask: a.mask };
    else if (a.kind === 'grant') {
      gen = BigInt(a.generation);
      m = { t: 'grant', generation: gen, deadlineNs: FAR, active: a.active, axisMask: a.active ? ALL : 0 };
    } else if (a.kind === 'inject') m = { t: 'inject', id: id++, fault: a.fault as never };
    else m = { t: 'inject', id: id++, fault: { kind: 'clear' } };
    host.handle(m);
  }
  for (let k = 0; k < 100; k++) host.cycle();
  const cycles = host.core.cycleCount;
  await host.close();
  return { sent, cycles };
}

// Events carry the core's time; each run has its own clock origin, so times are compared from the first event.
const outputsOf = (sent: FromCore[]) => {
  const out = sent.filter((m) => m.t === 'reply' || m.t === 'event' || m.t === 'home_done' || m.t === 'stop_drained');
  const first = out.find((m) => m.t === 'event' && m.time_ns !== undefined) as { time_ns?: bigint } | undefined;
  const t0 = first?.time_ns ?? 0n;
  return out.map((m) => (m.t === 'event' && m.time_ns !== undefined ? { ...m, time_ns: m.time_ns - t0 } : m));
};

test('property: record -> strict replay of random machine-operation sequences on the sim has no divergence', async () => {
  // The sequences must do real things: accepted commands and events (faults, enable/arm changes) occur.
  let accepted = 0;
  let events = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 14 }), async (actions) => {
      const file = join(DIR, `${seq++}.hilrec`);
      const rec = await record(actions, file);
      const scan = scanRecording(file);
      expect(scan.frames).toBe(rec.cycles);
      const sent: FromCore[] = [];
      const host = await CoreHost.create({ machine: MACHINE, driver: 'replay', driverParams: { file, reportFile: '' }, clock: { mode: 'stepped' }, captureRetentionMs: 0 }, (m) => sent.push(m));
      const out = runReplay(host, scan);
      await host.close();
      expect(out.divergence).toBeNull();
      expect(out.cycles).toBe(rec.cycles);
      expect(host.driverHost.submissionFailures).toBe(0);
      // the same replies and events, in the same order (the replay's injections are accepted, not applied:
      // the recorded inputs carry the fault)
      expect(outputsOf(sent)).toEqual(outputsOf(rec.sent));
      accepted += rec.sent.filter((m) => m.t === 'reply' && m.result.Result === 0).length;
      events += rec.sent.filter((m) => m.t === 'event').length;
      rmSync(file, { force: true });
    }),
    { numRuns: 25 },
  );
  expect(accepted).toBeGreaterThan(25);
  expect(events).toBeGreaterThan(10);
});
