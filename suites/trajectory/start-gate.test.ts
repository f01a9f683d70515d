// The motion start gate, one precondition at a time (document 1 part 4 arm: "the motion start gate is
// checked at every Start and jog"; start_trajectory and start_program: "the same start gate", not_ready
// and mode_conflict keep the handle; docs/profile.md "Trajectories" Start gate for the order and the
// native reason). Each test breaks exactly one precondition of a cell that is otherwise ready, tries
// start_trajectory, start_program and a jog, and shows the handle kept; then mends it and shows the same
// Start admitted, so the refusal was that precondition's. A gate that skips the precondition passes the
// other tests of the suites (they refuse for another reason first) but fails here.
//
// Preconditions the API cannot break on their own, and why (each said where it would be tested):
// - "no latched fault on them": a latched fault disarms the core and arm is refused while it is latched,
//   so a faulted cell is never armed: the refusal could be the armed check's.
// - "no stop draining": a stop ends the grant and the fence refuses every fenced call of it first.
//
// Portable: axes from Describe; the axis the Starts select is the first one the suite can make ready on its
// own (Home evidence, a native Home, or no Home required: harness/machine.ts readyAxis); the axis for the
// Home case is one that requires Home (Describe require_home), lacks it and has a native Home, other than
// the one readied. Stepped clock, one stack for the file.

import { afterEach, beforeEach } from 'vitest';
import type { Session } from '../../harness/clients/cell.ts';
import { hostNs, readJogClock } from '../../harness/clients/jog.ts';
import { readyStepped, settle } from '../../harness/clients/stepped.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, sharedVariant, test } from '../../harness/fixture.ts';
import { machineOf, type Axis } from '../../harness/machine.ts';
import { COLS, dwell, encodeProgram, type ProgramFile } from '../program/files.ts';
import { postProgram } from '../program/upload.ts';

type Data = Record<string, any>;
interface AxisD {
  id: string;
  require_home?: boolean;
}

const v = sharedVariant<{ binding: { pair_id: string; revision: bigint; configuration_sha256: string }; axes: AxisD[]; clock: string }>({ clock: 'stepped' });

let s: Session | undefined;
let hold: number[] = [];
/** The axis the Starts select (bit `a.bit`), or why none can be made ready. */
let a: Axis;
let unready: string | undefined;

beforeEach(async () => {
  s = undefined;
  if (v.cannot !== undefined) return;
  const m = machineOf(v.description);
  await v.target.step!(20); // a status publication to read Home evidence from
  const valid = (await readStatus(v.target.client())).core!.home_valid_mask;
  const ready = m.readyAxis(valid);
  unready = ready ? undefined : m.readyAxisMissing;
  if (!ready) return;
  a = ready;
  ({ s, hold } = await readyStepped(v.target, v.cell, v.target.client(), { axes: v.description.axes.length, homeMask: m.homeFor(a, valid) }));
});
const cannot = () => v.cannot ?? unready;
afterEach(async () => {
  if (s) await settle(v.target, v.cell.cleanup(), 5);
});

const stepped = <T>(p: Promise<T>): Promise<T> => settle(v.target, p, 5);
const fenced = (op: string, fields: Record<string, unknown> = {}) => stepped(v.cell.fenced(op, s!, fields));
const status = async () => (await readStatus(v.target.client())) as unknown as Data;
const stateOf = async (h: bigint) => ((await status()).execution.handles as Data[]).find((x) => x.handle === h)?.state;
const all = () => (v.description.axes.length >= 32 ? 0xffffffff : (1 << v.description.axes.length) - 1);
const nine = () => v.description.axes.length === COLS;
/**
 * The dense program's column bit for a machine axis: column j drives the j-th rad axis in Describe's order
 * (document 2 part 7 axis map; suites/program/admission.test.ts "axis maps on other machines"), or
 * undefined when the axis is not one of them (then the program half of a case is not run).
 */
const columnBit = (x: Axis): number | undefined => {
  const j = machineOf(v.description).rotaryAxes.findIndex((r) => r.index === x.index);
  return nine() && j >= 0 ? 2 ** j : undefined;
};

/** A trajectory holding every axis where it stands, owning `mask`. */
async function trajectory(mask: number): Promise<bigint> {
  const at = (ms: number) => ({ time_ns: BigInt(ms) * 1_000_000n, position: hold });
  const r = await fenced('prepare_trajectory', { axis_mask: mask, points: [at(0), at(50)] });
  expect(r.status, r.reply.error).toBe(200);
  return r.reply.handle!;
}

/** A program holding every axis where it stands, owning `mask` (file axis_mask). */
async function program(mask: number, tag: string): Promise<{ identity: Data; handle: bigint }> {
  const f: ProgramFile = { segments: [dwell('still', hold, 6)], manifestRevision: v.description.binding.revision, axisMask: mask, programId: `gate-${tag}`, planId: `plan:gate-${tag}` };
  const r = await postProgram(v.target.client(), s!, encodeProgram(f));
  expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
  const identity = (r.reply.data as Data).identity;
  const handle = ((await status()).execution.handles as Data[]).filter((x) => x.identity?.program_id === identity.program_id).at(-1)!.handle as bigint;
  return { identity, handle };
}

/** What a refused gate answers: not_ready, native reason 2, the axes it names; the handle still prepared. */
async function expectNotReady(r: Awaited<ReturnType<typeof fenced>>, axes: number, handle?: bigint) {
  expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'not_ready' });
  expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 2, AxisMask: axes });
  if (handle !== undefined) expect(await stateOf(handle)).toBe('prepared');
}

async function beginJog(mask: number) {
  const clock = await readJogClock(v.target.client());
  const origin = hostNs();
  return fenced('begin_jog', { axis_mask: mask, source_origin_host_ns: origin, deadline_host_ns: origin + 5_000_000_000n, clock_incarnation: clock.incarnation });
}

describe('the start gate, one precondition at a time (stepped clock)', () => {
  test(
    'not armed (every axis enabled): start_trajectory, start_program and begin_jog answer not_ready, the handles stay prepared; armed again, the same Start is admitted',
    covers('reason:not_ready', 'rule:op.arm.core_armed', 'rule:op.start.handle_kept', 'transition:handle:prepared->prepared:start_refused'),
    async ({ skip }) => {
      skip(cannot() !== undefined, cannot() ?? '');
      // enable 0 disarms (docs/profile.md enable); enable every axis again: enabled, not armed.
      expect((await fenced('enable', { axis_mask: 0 })).status).toBe(200);
      expect((await fenced('enable', { axis_mask: all() })).status).toBe(200);
      await v.target.step!(20);
      const st = await status();
      expect({ armed: st.core.armed, enabled: Number(st.core.axis_enable_mask) }).toEqual({ armed: 0n, enabled: all() });
      // One plan slot: each kind is prepared and refused in turn (the program supersedes the trajectory).
      const t = await trajectory(a.bit);
      await expectNotReady(await fenced('start_trajectory', { handle: t }), a.bit, t);
      const col = columnBit(a);
      const p = col !== undefined ? await program(col, 'armed') : undefined;
      if (p) await expectNotReady(await fenced('start_program', { identity: p.identity }), a.bit, p.handle);
      const j = await beginJog(a.bit);
      expect({ status: j.status, label: j.label }).toEqual({ status: 409, label: 'not_ready' });
      expect((await fenced('arm')).status).toBe(200);
      const ok = await fenced(p ? 'start_program' : 'start_trajectory', p ? { identity: p.identity } : { handle: t });
      expect({ status: ok.status, error: ok.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );

  test(
    'armed, but a selected axis not enabled: the Starts and begin_jog answer not_ready naming that axis, handles kept; the axis enabled again, the Start is admitted',
    covers('reason:not_ready', 'rule:op.start.handle_kept', 'transition:handle:prepared->prepared:start_refused'),
    async ({ skip }) => {
      skip(cannot() !== undefined, cannot() ?? '');
      const n = v.description.axes.length;
      skip(n < 2, 'the case needs one axis enabled and another not');
      // Every axis but the selected one enabled: the core stays armed (something is enabled).
      expect((await fenced('enable', { axis_mask: all() & ~a.bit })).status).toBe(200);
      await v.target.step!(20);
      const st = await status();
      skip(st.core.armed !== 1n, 'this target disarms when an axis is disabled: "armed with an axis not enabled" cannot be set up');
      expect(Number(st.core.axis_enable_mask) & a.bit).toBe(0);
      const col = columnBit(a);
      const p = col !== undefined ? await program(col, 'enabled') : undefined;
      if (p) await expectNotReady(await fenced('start_program', { identity: p.identity }), a.bit, p.handle);
      const t = await trajectory(a.bit);
      await expectNotReady(await fenced('start_trajectory', { handle: t }), a.bit, t);
      const j = await beginJog(a.bit);
      expect({ status: j.status, label: j.label }).toEqual({ status: 409, label: 'not_ready' });
      expect(j.reply.native_result).toMatchObject({ Reason: 2, AxisMask: a.bit });
      // A jog of an enabled axis is admitted meanwhile (the gate looks at the selected axes; jog needs no
      // Home, docs/profile.md "Jog").
      const other = await beginJog(machineOf(v.description).axes.find((x) => x.index !== a.index)!.bit);
      expect(other.status, other.reply.error).toBe(200);
      expect((await fenced('end_jog', { jog_generation: other.reply.handle! })).status).toBe(200);
      await v.target.step!(100);
      expect((await fenced('enable', { axis_mask: all() })).status).toBe(200);
      await v.target.step!(20);
      const ok = await fenced('start_trajectory', { handle: t });
      expect({ status: ok.status, error: ok.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );

  test(
    'armed and enabled, but a selected axis that requires Home has none: the Starts answer not_ready naming it, handles kept; homed, the Start is admitted',
    covers('reason:not_ready', 'rule:op.start.handle_kept', 'transition:handle:prepared->prepared:start_refused'),
    async ({ skip }) => {
      skip(cannot() !== undefined, cannot() ?? '');
      const st0 = await status();
      const m = machineOf(v.description);
      const k = m.axes.findIndex((x) => x.index !== a.index && x.requireHome && x.nativeHome && ((Number(st0.core.home_valid_mask) >>> x.index) & 1) === 0);
      skip(k < 0, `no axis other than ${a.id} requires Home, lacks it and has a native Home to give it (Describe require_home and native_home, status home_valid_mask)`);
      // Jog needs no Home (docs/profile.md "Jog"): only the Starts are refused here.
      const t = await trajectory(1 << k);
      await expectNotReady(await fenced('start_trajectory', { handle: t }), 1 << k, t);
      const col = columnBit(m.axes[k]!);
      const p = col !== undefined ? await program(col, 'home') : undefined;
      if (p) await expectNotReady(await fenced('start_program', { identity: p.identity }), 1 << k, p.handle);
      // Home the axis the way the cell is readied (disarmed and disabled first, docs/profile.md home).
      expect((await fenced('enable', { axis_mask: 0 })).status).toBe(200);
      await v.target.step!(20);
      const h = await settle(v.target, v.cell.fenced('home', s!, { axis_mask: 1 << k }), 20);
      expect(h.status, h.reply.error).toBe(200);
      expect((await fenced('enable', { axis_mask: all() })).status).toBe(200);
      expect((await fenced('arm')).status).toBe(200);
      await v.target.step!(20);
      hold = ((await status()).axes as Data[]).map((a) => Number(a.position));
      // The Home moved the axis: prepare again from where it now is (a Start begins at the held target).
      const t2 = await trajectory(1 << k);
      const ok = await fenced('start_trajectory', { handle: t2 });
      expect({ status: ok.status, error: ok.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );
});
