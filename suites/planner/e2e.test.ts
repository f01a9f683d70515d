// End to end from a weldplan to the cell (document 2 part 1, document 1 part 4 prepare_program and
// start_program): pack the fixture program as a user would, plan it with dense=true, fetch the dense file,
// have the control service admit it with prepare_program, then start it with the identity prepare_program
// returned and observe the execution complete. The start half skips, with the reason stated, on a target
// whose Describe does not list start_program as implemented. The cell is moved through a CellDriver: on the
// sim target the file's stack runs on the stepped clock and the test steps it through the program, so a
// loaded host cannot make the drive lag; on a real-time target the same test waits.

import { packWeldplan, programDigest } from '../../harness/clients/weldplan.ts';
import type { Cell, Session } from '../../harness/clients/cell.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, needsMotion, stepsItsCell, type Description } from '../../harness/fixture.ts';
import { driverOf } from '../../harness/clients/stepped.ts';
import { decodeDense } from '../../harness/oracle/dense.ts';
import { postProgram } from '../program/upload.ts';
import { denseFitDecoded } from '../dense-format/reference.ts';
import { machineOf } from '../../harness/machine.ts';
import { baseProgram, PROGRAM_ID, planDense, plannerTest as test, type Planner, usePlanner } from './toolkit.ts';

/** The fixture program packed exactly as `hil weldplan pack` would, planned with dense=true and fetched. */
async function planAndFetch(p: Planner): Promise<{ result: Record<string, any>; blob: Uint8Array }> {
  const prog = baseProgram(); // the fixture, placed on the planner's cell
  expect(prog.program_digest).toBe(programDigest(prog)); // sealed
  return planDense(p, packWeldplan({ program: prog }));
}

async function prepare(cell: Cell, client: ControlClient, blob: Uint8Array, s?: Session) {
  // Held (renewed) like a controller's while it uploads: a bare grant's lease can run out during a large
  // upload on a loaded machine, and the upload is then refused control_session_stale, correctly.
  const session = s ?? (await cell.hold());
  const r = await postProgram(client, session, blob);
  return { r, session };
}

stepsItsCell();

describe('weldplan to cell', () => {
  test(
    "the planner's dense file is admitted by prepare_program with the planner's identity",
    covers('rule:dense_admission.boundary_merge', 'field:Program.identity', 'field:Program.segments', 'field:Program.samples', 'field:Program.normalised_samples', 'field:Program.axis_mask', 'field:Program.requires_process_io'),
    async ({ planner, skip, cell, client, description }) => {
      const p = usePlanner({ skip }, planner);
      const { result, blob } = await planAndFetch(p);
      const d = result.dense;
      const x = decodeDense(blob);
      // The planner plans nine columns for its robot model: a cell that maps other axes answers the
      // documented refusal of the file (document 2 part 7), a cell whose limits do not hold it cannot show the admission.
      const fit = denseFitDecoded(machineOf(description), x);
      if ('skip' in fit) skip(fit.skip);
      const { r } = await prepare(cell, client, blob);
      if ('refusal' in fit) {
        expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: fit.refusal });
        return;
      }
      expect({ status: r.status, error: r.reply.error }, JSON.stringify(r.reply.error)).toEqual({ status: 200, error: undefined });
      const data = r.reply.data as Record<string, any>;
      expect(data.identity).toMatchObject({
        plan_id: d.plan_id, program_id: PROGRAM_ID, program_digest: d.program_digest, trajectory_digest: d.trajectory_digest, source_digest: d.trajectory_digest,
        manifest_revision: 1n, plan_revision: 1n,
      });
      expect(data.identity.normalised_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(BigInt(data.segments)).toBe(BigInt(x.segments.length));
      expect(BigInt(data.samples)).toBe(BigInt(x.totalSampleCount));
      // Every boundary merges: executed points = samples - segments + 1 (document 2 part 7 "Admission").
      expect(BigInt(data.normalised_samples)).toBe(BigInt(x.totalSampleCount - x.segments.length + 1));
      // The file's commanded columns, as the planner's cell named them (0x1ff for nine axes, 0x3f for six).
      expect(BigInt(data.axis_mask)).toBe(BigInt(x.axisMask));
      // A set torch bit or a process marker makes the program require process I/O (document 2 part 7).
      const torch = x.segments.some((s) => Array.from(s.flags).some((f) => (f & 1) === 1)) || (Array.isArray(x.header.process_markers) && x.header.process_markers.length > 0);
      expect(data.requires_process_io).toBe(torch);
    },
  );

  test(
    'start_program with the returned identity runs the planned program to completion',
    covers('rule:dense_admission.digests_to_start'),
    async ({ planner, skip, cell, client, target, description }) => {
      const p = usePlanner({ skip }, planner);
      const cap = (description as Description).capabilities.find((c) => c.name === 'start_program');
      skip(cap?.state !== 'implemented', 'start_program not served by target');
      needsMotion({ skip }, target);
      const { blob } = await planAndFetch(p);
      const m = machineOf(description);
      const x = decodeDense(blob);
      const fit = denseFitDecoded(m, x);
      skip(!('admitted' in fit), 'admitted' in fit ? '' : 'skip' in fit ? fit.skip : `${fit.reason}: the file is refused ${fit.refusal} (shown by the admission test)`);
      const stuck = m.axes.find((a) => !a.nativeHome && a.config?.requireHome !== false);
      skip(stuck !== undefined, `the program needs every axis ready; ${stuck?.id} has no native Home and needs Home (or the run has no configuration saying it needs none)`);
      const drive = driverOf(target, client, description);
      const s = await cell.hold({ requested_lease_ms: 2_000 });
      const axes = description.axes.length;
      const all = (1 << axes) - 1;
      const homeMask = description.axes.reduce((m, a, i) => (a.native_home === true ? m | (1 << i) : m), 0);
      const st0 = await drive.status((x) => x.core !== null, 1_000);
      if (homeMask !== 0 && (Number(st0.core!.home_valid_mask) & homeMask) !== homeMask) {
        const h = await drive.answer(cell.fenced('home', s, { axis_mask: homeMask }), 20);
        expect(h.status, h.reply.error).toBe(200);
        await drive.status((x) => (Number(x.core!.home_valid_mask) & homeMask) === homeMask, 15_000);
      }
      expect((await drive.answer(cell.fenced('enable', s, { axis_mask: all }), 5)).status).toBe(200);
      const a = await drive.answer(cell.fenced('arm', s), 5);
      expect(a.status, a.reply.error).toBe(200);
      await drive.status((x) => Number(x.core!.axis_enable_mask) === all, 3_000);
      const { r } = await prepare(cell, client, blob, s);
      expect(r.status, r.reply.error).toBe(200);
      const identity = (r.reply.data as Record<string, any>).identity;
      const before = ((await readStatus(client)) as unknown as { execution: { generation: bigint } }).execution.generation;
      const start = await drive.answer(cell.fenced('start_program', s, { identity }), 5);
      expect(start.status, start.reply.error).toBe(200);
      // The plan's own time and 10 s more: a real-time cell is given that much wall time, a stepped one that
      // much cell time.
      const done = (await drive.status(
        (x) => {
          const e = (x as unknown as { execution: { generation: bigint; state: string } }).execution;
          return e.generation === before + 1n && (e.state === 'completed' || e.state === 'faulted');
        },
        Math.ceil(x.totalDurationS * 1000) + 10_000,
      )) as unknown as { execution: { state: string; generation: bigint; error?: string }; core: { execution_fault_reasons: bigint } | null };
      // Plain values only: a bigint in a failing diff cannot be sent back from the test worker.
      const why = `execution ${done.execution.state} ${done.execution.error ?? ''}, fault bits ${String(done.core?.execution_fault_reasons)}`;
      expect([done.execution.state, String(done.execution.generation)], why).toEqual(['completed', String(before + 1n)]);
    },
  );
});
