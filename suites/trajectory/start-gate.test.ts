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
// the one readied. One cell for the file, moved through its CellDriver (stepsItsCell): on the stepped clock
// where the target runs the file's stack so, in real time on any other (an external service, a rig), where
// the tests arm and start motion only with --allow-motion.

import type { CheckedReply } from '../../harness/oracle/reply.ts';
import type { Session } from '../../harness/clients/cell.ts';
import { hostNs, readJogClock } from '../../harness/clients/jog.ts';
import { readyDriven } from '../../harness/clients/stepped.ts';
import { readStatus, type StatusView } from '../../harness/clients/status.ts';
import { covers, describe, expect, needsMotion, stepsItsCell, test, type CellFixtures } from '../../harness/fixture.ts';
import { machineOf, type Axis } from '../../harness/machine.ts';
import { COLS, dwell, encodeProgram, type ProgramFile } from '../program/files.ts';
import { postProgram } from '../program/upload.ts';

stepsItsCell();

type Data = Record<string, any>;

/** The cell ready for a Start: a held grant, every axis enabled and armed, the selected axis `a` ready. */
interface Gate {
  x: CellFixtures;
  s: Session;
  hold: number[];
  /** The axis the Starts select (bit `a.bit`). */
  a: Axis;
}

/**
 * Hold a grant, give the selected axis Home where it needs one for a Start (harness/machine.ts homeFor),
 * enable every axis and arm; skips with the reason where no axis can be made ready or motion is not allowed.
 */
async function gate(x: CellFixtures): Promise<Gate> {
  needsMotion({ skip: x.skip }, x.target);
  const m = machineOf(x.description);
  const st0 = await x.drive.status((st) => st.core !== null, 1_000); // a status publication to read Home evidence from
  const valid = st0.core!.home_valid_mask;
  const a = m.readyAxis(valid);
  if (!a) x.skip(m.readyAxisMissing);
  const { s, hold } = await readyDriven(x.cell, x.drive, { axes: x.description.axes.length, homeMask: m.homeFor(a!, valid) });
  return { x, s, a: a!, hold };
}

const fenced = (g: Gate, op: string, fields: Record<string, unknown> = {}): Promise<CheckedReply> => g.x.op(op, g.s, fields);
const status = async (g: Gate) => (await readStatus(g.x.client)) as unknown as Data;
/** Status once `pred` holds (the cell moved on as far as it needs: stepped, or waited for in real time). */
const settled = (g: Gate, pred: (st: StatusView) => boolean) => g.x.drive.status(pred, 3_000) as unknown as Promise<Data>;
const stateOf = async (g: Gate, h: bigint) => ((await status(g)).execution.handles as Data[]).find((x) => x.handle === h)?.state;
const allOf = (x: CellFixtures) => (x.description.axes.length >= 32 ? 0xffffffff : (1 << x.description.axes.length) - 1);
const nine = (g: Gate) => g.x.description.axes.length === COLS;
/**
 * The dense program's column bit for a machine axis: column j drives the j-th rad axis in Describe's order
 * (document 2 part 7 axis map; suites/program/admission.test.ts "axis maps on other machines"), or
 * undefined when the axis is not one of them (then the program half of a case is not run).
 */
const columnBit = (g: Gate, x: Axis): number | undefined => {
  const j = machineOf(g.x.description).rotaryAxes.findIndex((r) => r.index === x.index);
  return nine(g) && j >= 0 ? 2 ** j : undefined;
};

/** A trajectory holding every axis where it stands, owning `mask`. */
async function trajectory(g: Gate, mask: number): Promise<bigint> {
  const at = (ms: number) => ({ time_ns: BigInt(ms) * 1_000_000n, position: g.hold });
  const r = await fenced(g, 'prepare_trajectory', { axis_mask: mask, points: [at(0), at(50)] });
  expect(r.status, r.reply.error).toBe(200);
  return r.reply.handle!;
}

/** A program holding every axis where it stands, owning `mask` (file axis_mask). */
async function program(g: Gate, mask: number, tag: string): Promise<{ identity: Data; handle: bigint }> {
  const revision = (g.x.description as unknown as { binding: { revision: bigint } }).binding.revision;
  const f: ProgramFile = { segments: [dwell('still', g.hold, 6)], manifestRevision: revision, axisMask: mask, programId: `gate-${tag}`, planId: `plan:gate-${tag}` };
  const r = await postProgram(g.x.client, g.s, encodeProgram(f));
  expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
  const identity = (r.reply.data as Data).identity;
  const handle = ((await status(g)).execution.handles as Data[]).filter((x) => x.identity?.program_id === identity.program_id).at(-1)!.handle as bigint;
  return { identity, handle };
}

/** What a refused gate answers: not_ready, native reason 2, the axes it names; the handle still prepared. */
async function expectNotReady(g: Gate, r: CheckedReply, axes: number, handle?: bigint) {
  expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'not_ready' });
  expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 2, AxisMask: axes });
  if (handle !== undefined) expect(await stateOf(g, handle)).toBe('prepared');
}

async function beginJog(g: Gate, mask: number) {
  const clock = await readJogClock(g.x.client);
  const origin = hostNs();
  return fenced(g, 'begin_jog', { axis_mask: mask, source_origin_host_ns: origin, deadline_host_ns: origin + 5_000_000_000n, clock_incarnation: clock.incarnation });
}

describe('the start gate, one precondition at a time', () => {
  test(
    'not armed (every axis enabled): start_trajectory, start_program and begin_jog answer not_ready, the handles stay prepared; armed again, the same Start is admitted',
    covers('reason:not_ready', 'rule:op.arm.core_armed', 'rule:op.start.handle_kept', 'transition:handle:prepared->prepared:start_refused'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      const g = await gate({ cell, client, description, drive, op, target, skip });
      const all = allOf(g.x);
      // enable 0 disarms (docs/profile.md enable); enable every axis again: enabled, not armed.
      expect((await fenced(g, 'enable', { axis_mask: 0 })).status).toBe(200);
      expect((await fenced(g, 'enable', { axis_mask: all })).status).toBe(200);
      const st = await settled(g, (v) => v.core!.armed === 0n && Number(v.core!.axis_enable_mask) === all);
      expect({ armed: st.core.armed, enabled: Number(st.core.axis_enable_mask) }).toEqual({ armed: 0n, enabled: all });
      // One plan slot: each kind is prepared and refused in turn (the program supersedes the trajectory).
      const t = await trajectory(g, g.a.bit);
      await expectNotReady(g, await fenced(g, 'start_trajectory', { handle: t }), g.a.bit, t);
      const col = columnBit(g, g.a);
      const p = col !== undefined ? await program(g, col, 'armed') : undefined;
      if (p) await expectNotReady(g, await fenced(g, 'start_program', { identity: p.identity }), g.a.bit, p.handle);
      const j = await beginJog(g, g.a.bit);
      expect({ status: j.status, label: j.label }).toEqual({ status: 409, label: 'not_ready' });
      expect((await fenced(g, 'arm')).status).toBe(200);
      const ok = await fenced(g, p ? 'start_program' : 'start_trajectory', p ? { identity: p.identity } : { handle: t });
      expect({ status: ok.status, error: ok.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );

  test(
    'armed, but a selected axis not enabled: the Starts and begin_jog answer not_ready naming that axis, handles kept; the axis enabled again, the Start is admitted',
    covers('reason:not_ready', 'rule:op.start.handle_kept', 'transition:handle:prepared->prepared:start_refused'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      skip(description.axes.length < 2, 'the case needs one axis enabled and another not');
      const g = await gate({ cell, client, description, drive, op, target, skip });
      const [a, all] = [g.a, allOf(g.x)];
      // Every axis but the selected one enabled: the core stays armed (something is enabled).
      expect((await fenced(g, 'enable', { axis_mask: all & ~a.bit })).status).toBe(200);
      const st = await settled(g, (v) => Number(v.core!.axis_enable_mask) === (all & ~a.bit));
      skip(st.core.armed !== 1n, 'this target disarms when an axis is disabled: "armed with an axis not enabled" cannot be set up');
      expect(Number(st.core.axis_enable_mask) & a.bit).toBe(0);
      const col = columnBit(g, a);
      const p = col !== undefined ? await program(g, col, 'enabled') : undefined;
      if (p) await expectNotReady(g, await fenced(g, 'start_program', { identity: p.identity }), a.bit, p.handle);
      const t = await trajectory(g, a.bit);
      await expectNotReady(g, await fenced(g, 'start_trajectory', { handle: t }), a.bit, t);
      const j = await beginJog(g, a.bit);
      expect({ status: j.status, label: j.label }).toEqual({ status: 409, label: 'not_ready' });
      expect(j.reply.native_result).toMatchObject({ Reason: 2, AxisMask: a.bit });
      // A jog of an enabled axis is admitted meanwhile (the gate looks at the selected axes; jog needs no
      // Home, docs/profile.md "Jog").
      const other = await beginJog(g, machineOf(description).axes.find((x) => x.index !== a.index)!.bit);
      expect(other.status, other.reply.error).toBe(200);
      expect((await fenced(g, 'end_jog', { jog_generation: other.reply.handle! })).status).toBe(200);
      await drive.elapse(100);
      expect((await fenced(g, 'enable', { axis_mask: all })).status).toBe(200);
      await settled(g, (v) => Number(v.core!.axis_enable_mask) === all);
      const ok = await fenced(g, 'start_trajectory', { handle: t });
      expect({ status: ok.status, error: ok.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );

  test(
    'armed and enabled, but a selected axis that requires Home has none: the Starts answer not_ready naming it, handles kept; homed, the Start is admitted',
    covers('reason:not_ready', 'rule:op.start.handle_kept', 'transition:handle:prepared->prepared:start_refused'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      const g = await gate({ cell, client, description, drive, op, target, skip });
      const st0 = await status(g);
      const m = machineOf(description);
      const all = allOf(g.x);
      const k = m.axes.findIndex((x) => x.index !== g.a.index && x.requireHome && x.nativeHome && ((Number(st0.core.home_valid_mask) >>> x.index) & 1) === 0);
      skip(k < 0, `no axis other than ${g.a.id} requires Home, lacks it and has a native Home to give it (Describe require_home and native_home, status home_valid_mask)`);
      // Jog needs no Home (docs/profile.md "Jog"): only the Starts are refused here.
      const t = await trajectory(g, 1 << k);
      await expectNotReady(g, await fenced(g, 'start_trajectory', { handle: t }), 1 << k, t);
      const col = columnBit(g, m.axes[k]!);
      const p = col !== undefined ? await program(g, col, 'home') : undefined;
      if (p) await expectNotReady(g, await fenced(g, 'start_program', { identity: p.identity }), 1 << k, p.handle);
      // Home the axis the way the cell is readied (disarmed and disabled first, docs/profile.md home).
      expect((await fenced(g, 'enable', { axis_mask: 0 })).status).toBe(200);
      await settled(g, (v) => Number(v.core!.axis_enable_mask) === 0);
      const h = await drive.answerWithin(cell.fenced('home', g.s, { axis_mask: 1 << k }), 60_000);
      expect(h.status, h.reply.error).toBe(200);
      expect((await fenced(g, 'enable', { axis_mask: all })).status).toBe(200);
      await settled(g, (v) => Number(v.core!.axis_enable_mask) === all);
      expect((await fenced(g, 'arm')).status).toBe(200);
      const st = await settled(g, (v) => v.core!.armed === 1n);
      g.hold = (st.axes as Data[]).map((x) => Number(x.position));
      // The Home moved the axis: prepare again from where it now is (a Start begins at the held target).
      const t2 = await trajectory(g, 1 << k);
      const ok = await fenced(g, 'start_trajectory', { handle: t2 });
      expect({ status: ok.status, error: ok.reply.error }).toEqual({ status: 200, error: undefined });
    },
  );
});
