// Handles shared by trajectories and programs (document 1 part 3 handle states: "trajectory and program
// handles"; part 2 Request.handle "owned by the current core incarnation and grant"; part 4
// prepare_trajectory, prepare_program, discard_trajectory, start_program; part 8 upload slots per kind;
// docs/profile.md "Trajectories" Handles and "Programs" Handles). One plan slot, one numbering: what
// a client is told about a handle must be what the core holds under that number.
//
// Portable: every axis is held where it stands (the trajectories and programs here move nothing); the
// programs need a nine-axis machine (a dense file maps nine axis ids) and skip otherwise.

import { beforeEach } from 'vitest';
import { epochNow } from '../../harness/clients/keeper.ts';
import type { Session } from '../../harness/clients/cell.ts';
import { eventCursor, eventsSince, waitForEvent } from '../../harness/clients/events.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, needsFaults, needsMotion, recoveringTest } from '../../harness/fixture.ts';
import type { Cell } from '../../harness/clients/cell.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { hostBound } from '../../harness/lateness.ts';
import { machineOf, needs } from '../../harness/machine.ts';
import { COLS, IDENT, dwell, encodeProgram, type ProgramFile } from '../program/files.ts';
import { postProgram } from '../program/upload.ts';

const test = recoveringTest;
type Data = Record<string, any>;

const statusOf = async (client: ControlClient) => (await readStatus(client)) as unknown as Data;
const recordOf = async (client: ControlClient, h: bigint) => ((await statusOf(client)).execution.handles as Data[]).find((x) => x.handle === h);

/**
 * A held grant (its renewals from the grant keeper's thread, at the machine's lease ceiling) whose renewals
 * the test can pause, J1 homed when it lacks Home evidence, every axis enabled and armed.
 */
async function ready(cell: Cell, client: ControlClient, axes: number, homeBit = 1): Promise<{ s: Session; hold: number[]; pause: () => Promise<number>; resume: () => void }> {
  const s = await cell.hold();
  let lastRenewal = epochNow();
  /** Stop renewing, after one last renewal (the lease then runs its full length from now); its send time, epoch ms. */
  const pause = async () => {
    cell.pauseKeeping(s);
    lastRenewal = epochNow();
    expect((await cell.fenced('renew', s)).status).toBe(200);
    return lastRenewal;
  };
  const resume = () => cell.resumeKeeping(s, lastRenewal);
  // The core's first status publication (Status core is null until then: a cell of a long cycle publishes later).
  const st0 = await waitStatus(client, (x) => x.core !== null);
  expect(st0.core, "the core's first status publication").not.toBeNull();
  if (homeBit !== 0 && (st0.core!.home_valid_mask & BigInt(homeBit)) === 0n) {
    const h = await cell.fenced('home', s, { axis_mask: homeBit });
    expect(h.status, h.reply.error).toBe(200);
  }
  const all = axes >= 32 ? 0xffffffff : (1 << axes) - 1;
  expect((await cell.fenced('enable', s, { axis_mask: all })).status).toBe(200);
  const a = await cell.fenced('arm', s);
  expect(a.status, a.reply.error).toBe(200);
  const st = await waitStatus(client, (x) => Number(x.core!.axis_enable_mask) === all);
  return { s, hold: st.axes.map((x) => Number(x.position)), pause, resume };
}

/** A still program at `hold` (one dwell segment), identified by `tag`. */
function still(revision: bigint, hold: number[], tag: string, samples = 30): ProgramFile {
  return { segments: [dwell('still', hold, samples)], manifestRevision: revision, axisMask: 0x1, programId: `handles-${tag}`, planId: `plan:handles-${tag}`, programDigest: IDENT.programDigest };
}

async function program(client: ControlClient, s: Session, f: ProgramFile): Promise<{ identity: Data; handle: bigint }> {
  const r = await postProgram(client, s, encodeProgram(f));
  expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
  const identity = (r.reply.data as Data).identity;
  const rec = ((await statusOf(client)).execution.handles as Data[]).filter((x) => x.identity?.program_id === identity.program_id).at(-1)!;
  return { identity, handle: rec.handle };
}

const stillPoints = (hold: number[], ms = 100) => [
  { time_ns: 0n, position: hold },
  { time_ns: BigInt(ms) * 1_000_000n, position: hold },
];

let nine = false;
beforeEach<{ description: Data }>(({ description }) => {
  nine = (description.axes as unknown[]).length === COLS;
});
const needsNine = (skip: (c: boolean, note?: string) => void, axes: number) => skip(!nine, `a dense program maps nine axis ids; the target has ${axes} axes`);

describe('one numbering, one plan slot', () => {
  test(
    'prepare_program and prepare_trajectory committed while both wait on the core: each reply names the handle the core holds; the later one is prepared and starts, the earlier one is superseded',
    covers('transition:handle:prepared->superseded:newer_preparation', 'reason:handle_superseded', 'limit:upload_slots_per_kind'),
    async ({ cell, client, target, description, skip }) => {
      needsMotion({ skip }, target);
      needsFaults({ skip }, target);
      needsNine(skip, description.axes.length);
      const { s, hold, pause, resume } = await ready(cell, client, description.axes.length);
      const f = still(description.binding.revision as bigint, hold, 'race');
      // A first upload warms the service's decoder (the first can take a few hundred ms), so the raced
      // upload reaches the core within the held command's time.
      await program(client, s, still(description.binding.revision as bigint, hold, 'warm-up'));
      // No renewal may take the held command's place (the lease covers the race after the last one).
      let renewed = await pause();
      const lease = Number(s.grant.lease_ms);
      // The race runs on one unrenewed lease (the cell's ceiling: 500 ms on a LAN cell); the test renews
      // as soon as both replies are in, and the keeper renews again from then on. A refusal answered more
      // than a lease after the test's last renewal was sent says nothing about the target (the lease may
      // have run out as documented, document 1 part 3 renew; the core checks it against host time, so a core
      // starved by a loaded host ends it too): the host was too slow to fit the exchange in a lease. Inside
      // the lease the failure stands.
      let answered = renewed;
      const timed = async <T>(p: Promise<T>): Promise<T> => {
        try {
          return await p;
        } finally {
          answered = epochNow();
        }
      };
      await hostBound(
        { rule: 'document 1 part 3: a grant stays owned for its lease after a renewal', marginMs: lease, targetOnHost: true, measured: () => ({ ms: answered - renewed, what: "from the test's last renewal sent to the answer that failed" }) },
        async () => {
          // The core holds the next command it receives for a while (below the service's 1 s receipt bound and
          // the granted lease): whichever preparation reaches it first waits there while the other one arrives.
          await target.inject({ kind: 'stall_next_command', ms: Math.min(200, Math.floor(lease * 0.3)) });
          let up, tr;
          try {
            [up, tr] = await timed(Promise.all([postProgram(client, s, encodeProgram(f)), cell.fenced('prepare_trajectory', s, { axis_mask: 1, points: stillPoints(hold) })]));
          } finally {
            resume();
          }
          // One upload slot per kind: a program upload and a trajectory upload at once are both admitted.
          expect({ program: up.status, error: up.reply.error }).toEqual({ program: 200, error: undefined });
          expect({ trajectory: tr.status, error: tr.reply.error }).toEqual({ trajectory: 200, error: undefined });
          const sent = epochNow();
          const rn = await timed(cell.fenced('renew', s));
          expect({ renew: rn.status, error: rn.reply.error }).toEqual({ renew: 200, error: undefined });
          renewed = sent;
          const th = tr.reply.handle!;
          const handles = (await statusOf(client)).execution.handles as Data[];
          const prog = handles.filter((x) => x.identity?.program_id === f.programId).at(-1)!;
          expect(prog.handle).not.toBe(th);
          const traj = handles.find((x) => x.handle === th)!;
          expect([prog.state, traj.state].sort()).toEqual(['prepared', 'superseded']);
          // The prepared one starts: the core holds its plan under the number the client was given.
          if (traj.state === 'prepared') {
            const r = await timed(cell.fenced('start_trajectory', s, { handle: th }));
            expect({ status: r.status, label: r.label }).toEqual({ status: 200, label: undefined });
            const late = await timed(cell.fenced('start_program', s, { identity: (up.reply.data as Data).identity }));
            expect({ status: late.status, label: late.label }).toEqual({ status: 409, label: 'handle_superseded' });
          } else {
            const r = await timed(cell.fenced('start_program', s, { identity: (up.reply.data as Data).identity }));
            expect({ status: r.status, label: r.label }).toEqual({ status: 200, label: undefined });
            const late = await timed(cell.fenced('start_trajectory', s, { handle: th }));
            expect({ status: late.status, label: late.label }).toEqual({ status: 409, label: 'handle_superseded' });
          }
        },
      );
      await waitStatus(client, (x) => (x as unknown as Data).execution.state === 'completed', 5_000);
    },
  );
});

describe('discard_trajectory of a program handle', () => {
  test(
    'a prepared program handle is discarded (discarded, handle_transition, start_program then handle_discarded); a started one answers handle_active and keeps running; a discarded one answers handle_discarded',
    covers('transition:handle:prepared->discarded:discard', 'transition:handle:started->refused:discard', 'reason:handle_active', 'reason:handle_discarded', 'rule:handle.terminal_never_regain'),
    async ({ cell, client, target, description, skip }) => {
      needsMotion({ skip }, target);
      needsNine(skip, description.axes.length);
      const { s, hold } = await ready(cell, client, description.axes.length);
      const rev = description.binding.revision as bigint;
      const a = await program(client, s, still(rev, hold, 'discard-a'));
      const cursor = await eventCursor(client);
      const d = await cell.fenced('discard_trajectory', s, { handle: a.handle });
      expect({ status: d.status, label: d.label }).toEqual({ status: 200, label: undefined });
      expect(d.reply.sequence).toBeGreaterThan(0n);
      expect((await recordOf(client, a.handle))!.state).toBe('discarded');
      const evs = await eventsSince(client, cursor);
      expect(evs.filter((e) => e.type === 'handle_transition' && (e.handle as Data).handle === a.handle).map((e) => `${(e.handle as Data).from}->${(e.handle as Data).to}`)).toEqual(['prepared->discarded']);
      const again = await cell.fenced('discard_trajectory', s, { handle: a.handle });
      expect({ status: again.status, label: again.label }).toEqual({ status: 409, label: 'handle_discarded' });
      const start = await cell.fenced('start_program', s, { identity: a.identity });
      expect({ status: start.status, label: start.label }).toEqual({ status: 409, label: 'handle_discarded' });
      // A started program: handle_active, and it runs on to completion.
      const b = await program(client, s, still(rev, hold, 'discard-b', 100));
      expect((await cell.fenced('start_program', s, { identity: b.identity })).status).toBe(200);
      const active = await cell.fenced('discard_trajectory', s, { handle: b.handle });
      expect({ status: active.status, label: active.label }).toEqual({ status: 409, label: 'handle_active' });
      expect((await recordOf(client, b.handle))!.state).toBe('started');
      await waitStatus(client, (x) => (x as unknown as Data).execution.state === 'completed', 5_000);
      expect((await recordOf(client, b.handle))!.state).toBe('consumed');
    },
  );
});

describe('handles that are not this grant’s or not of this kind', () => {
  test(
    'unknown_handle for a number never issued, for a program handle given to start_trajectory (kept prepared), and for a handle of an earlier core incarnation; an earlier grant’s handle answers its terminal state',
    covers('reason:unknown_handle', 'reason:handle_retired', 'reason:program_already_executing'),
    async ({ cell, client, target, description, skip }) => {
      needsMotion({ skip }, target);
      needsNine(skip, description.axes.length);
      const rev = description.binding.revision as bigint;
      let { s, hold } = await ready(cell, client, description.axes.length);
      const label = async (op: string, fields: Record<string, unknown>) => {
        const r = await cell.fenced(op, s, fields);
        return { op, status: r.status, label: r.label };
      };
      // A number never issued (far past the newest handle).
      for (const op of ['start_trajectory', 'discard_trajectory']) expect(await label(op, { handle: 1n << 40n })).toEqual({ op, status: 409, label: 'unknown_handle' });
      // A program handle is not a trajectory: start_trajectory does not start it, and it stays prepared.
      const p = await program(client, s, still(rev, hold, 'unknown'));
      expect(await label('start_trajectory', { handle: p.handle })).toEqual({ op: 'start_trajectory', status: 409, label: 'unknown_handle' });
      expect((await recordOf(client, p.handle))!.state).toBe('prepared');
      // program_already_executing through start_program: another identity while a program runs.
      expect((await cell.fenced('start_program', s, { identity: p.identity })).status).toBe(200);
      const other = { ...p.identity, program_id: `${p.identity.program_id}-other` };
      expect(await label('start_program', { identity: other })).toEqual({ op: 'start_program', status: 409, label: 'program_already_executing' });
      await waitStatus(client, (x) => (x as unknown as Data).execution.state === 'completed', 5_000);
      // An earlier grant's prepared handle: the grant's end retired it.
      const t = await cell.fenced('prepare_trajectory', s, { axis_mask: 1, points: stillPoints(hold) });
      expect(t.status, t.reply.error).toBe(200);
      expect((await cell.fenced('release', s)).status).toBe(200);
      ({ s, hold } = await ready(cell, client, description.axes.length));
      expect(await label('start_trajectory', { handle: t.reply.handle! })).toEqual({ op: 'start_trajectory', status: 409, label: 'handle_retired' });
      // An earlier core incarnation's handle (where the target can restart its core).
      if (!target.abilities.coreRestart) return;
      const u = await cell.fenced('prepare_trajectory', s, { axis_mask: 1, points: stillPoints(hold) });
      expect(u.status, u.reply.error).toBe(200);
      const cursor = await eventCursor(client);
      const daemonBefore = (await client.status()).reply.data as { daemon_incarnation: string };
      await target.restartCore();
      const changed = await waitForEvent(client, cursor, (e) => e.type === 'daemon_incarnation_changed');
      // incarnation has previous and current (document 1 part 6): from the core that held the handle to a new one.
      const inc = changed?.incarnation as { previous: string; current: string } | undefined;
      expect(inc?.previous, 'daemon_incarnation_changed previous').toBe(daemonBefore.daemon_incarnation);
      expect(inc?.current, 'daemon_incarnation_changed current').toBe(((await client.status()).reply.data as { daemon_incarnation: string }).daemon_incarnation);
      expect(inc!.current).not.toBe(inc!.previous);
      ({ s, hold } = await ready(cell, client, description.axes.length));
      expect(await label('start_trajectory', { handle: u.reply.handle! })).toEqual({ op: 'start_trajectory', status: 409, label: 'unknown_handle' });
      expect(await label('discard_trajectory', { handle: u.reply.handle! })).toEqual({ op: 'discard_trajectory', status: 409, label: 'unknown_handle' });
    },
  );
});


describe('a later execution replaces a running one', () => {
  test(
    'a Start while a trajectory runs: the running handle is consumed (started->consumed), the new one started, one execution_started each',
    covers('transition:handle:started->consumed:completion', 'transition:handle:prepared->started:start', 'event:execution_started'),
    async ({ cell, client, target, description, skip }) => {
      needsMotion({ skip }, target);
      // The axis the trajectories own: the first the suite can make ready (harness/machine.ts readyAxis).
      const m = machineOf(description);
      const valid = (await statusOf(client)).core.home_valid_mask as bigint;
      const axis = needs(skip, m.readyAxis(valid), m.readyAxisMissing);
      const { s, hold } = await ready(cell, client, description.axes.length, m.homeFor(axis, valid));
      const a = await cell.fenced('prepare_trajectory', s, { axis_mask: axis.bit, points: stillPoints(hold, 5_000) });
      expect(a.status, a.reply.error).toBe(200);
      const cursor = await eventCursor(client);
      expect((await cell.fenced('start_trajectory', s, { handle: a.reply.handle! })).status).toBe(200);
      // The second trajectory runs B_MS: its record must be read as started before it can complete on its own.
      const B_MS = 1_000;
      const b = await cell.fenced('prepare_trajectory', s, { axis_mask: axis.bit, points: stillPoints(hold, B_MS) });
      expect(b.status, b.reply.error).toBe(200);
      // A preparation does not touch the running handle.
      expect((await recordOf(client, a.reply.handle!))!.state).toBe('started');
      const sent = performance.now();
      const r = await cell.fenced('start_trajectory', s, { handle: b.reply.handle! });
      expect({ status: r.status, error: r.reply.error }).toEqual({ status: 200, error: undefined });
      expect((await recordOf(client, a.reply.handle!))!.state).toBe('consumed');
      // A host that stalled past B_MS between the Start and this read lets b complete first: that is the
      // harness's lateness, not a handle that skipped 'started' (document 1 part 5, handle states).
      await hostBound({ rule: 'document 1 part 5: a started handle stays started while its trajectory runs', marginMs: B_MS, since: sent, measured: () => ({ ms: performance.now() - sent, what: 'from the Start sent to the record read' }) }, async () => {
        expect((await recordOf(client, b.reply.handle!))!.state).toBe('started');
      });
      const evs = await eventsSince(client, cursor);
      const moves = (h: bigint) => evs.filter((e) => e.type === 'handle_transition' && (e.handle as Data).handle === h).map((e) => `${(e.handle as Data).from}->${(e.handle as Data).to}`);
      expect(moves(a.reply.handle!)).toEqual(['prepared->started', 'started->consumed']);
      expect(evs.filter((e) => e.type === 'execution_started').map((e) => (e.execution as Data).handle)).toEqual([a.reply.handle!, b.reply.handle!]);
      await waitStatus(client, (x) => (x as unknown as Data).execution.state === 'completed', 5_000);
      expect((await recordOf(client, b.reply.handle!))!.state).toBe('consumed');
    },
  );
});
