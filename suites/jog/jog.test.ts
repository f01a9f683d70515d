// Jog (document 1 part 1 "Jog datagrams"; part 2 Request jog fields, Response native_jog_result, the
// telemetry record's jog fields; part 3 "Jog session"; part 4 begin_jog, end_jog, jog, update_jog, halt,
// GET /v1/jog/clock, GET /v1/jog, GET /v1/jog/ingress; part 6 jog events; part 7 jog reasons; part 8
// limits). Jog is how a person moves the cell by hand, so every path that should stop motion is shown to
// stop it, in telemetry. Frame layout and the numbers of the jog reasons are our profile (docs/profile.md
// "Jog").
//
// One cell for the file, moved through its CellDriver (stepsItsCell): on the stepped clock where the target
// runs the file's stack so (the sim target: cycles run only when the test asks, so the outcome does not
// depend on how loaded the host is), in real time on any other (an external service, a rig), where the
// tests that arm and jog run only with --allow-motion. Motion is judged from the telemetry records, cycle by
// cycle and in record time (t_ns), never from the wall. Input age and lease deadlines are host monotonic
// time on every clock (document 1 part 3 "Jog session"), so the producer keeps its input fresh the way a
// real pendant does: a frame at least every quarter of the input age (Describe max_jog_input_age_ns) in real
// time. A jog that expired because the harness sent its next input late is the host's (hostJogExpiry), as
// is a deadline-bound check the harness got to late (hostBound), never a FAIL.
//
// Every test leaves the cell clean for the next (DESIGN.md rule 5): it is made ready again with
// readyDriven, and its grant released (a stop's or a lost lease's drain let end) when it ends. Ingress
// counters and jog generations run on across the file's tests, so each test counts from where it began.

import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Cell, DRAIN_MS, draining, type Session } from '../../harness/clients/cell.ts';
import type { BindingInput, ControlClient } from '../../harness/clients/control.ts';
import { eventCursor, eventsSince, type CellEvent } from '../../harness/clients/events.ts';
import { staleByHost } from '../../harness/clients/jog-stale.ts';
import { encodeJogFrame, hostNs, JogSender, readJog, readJogClock, readJogIngress, waitIngress, type JogFrame } from '../../harness/clients/jog.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { readyDriven, stepUntilSettled, type CellDriver } from '../../harness/clients/stepped.ts';
import { latestSequence, recordsSince } from '../../harness/clients/telemetry.ts';
import { LINK_DEFAULTS, machineOf, needs } from '../../harness/machine.ts';
import { covers, describe, expect, hostBound, needsMotion, profile, stepsItsCell, test, type CellFixtures, type Description } from '../../harness/fixture.ts';
import { HarnessError, verdictOfError } from '../../harness/errors.ts';
import type { Target } from '../../harness/targets/types.ts';
import { beginInTime } from './begin.ts';

stepsItsCell();

/** Nanoseconds as milliseconds to a tenth, for the figures of a host-too-slow judgement. */
const ms = (ns: bigint): number => Math.round(Number(ns) / 1e5) / 10;

interface AxisD {
  id: string;
  min_position: number;
  max_position: number;
  max_velocity: number;
  counts_per_unit: number;
  sign: number;
}
type Ingress = Record<string, unknown>;
interface Stack {
  target: Target;
  client: ControlClient;
  cell: Cell;
  drive: CellDriver;
  described: Description;
  /** The test's skip. */
  skip: CellFixtures['skip'];
  axes: AxisD[];
  cycleNs: bigint;
  maxAgeNs: bigint;
  sender: JogSender;
  incarnation: string;
  /** Let `n` cycles of the cell run: stepped, or in real time waited for until telemetry holds them. */
  step(n: number): Promise<void>;
  /** The ingress counters when the test began: what a test counts is its own frames. */
  base: Ingress;
  /**
   * The input deadlines the harness gave the core (host ns): each begin_jog's (its deadline, shortened
   * to origin + input age) and each accepted frame's (capture + input age), with when it was sent and,
   * for a frame, when the ingress had counted it accepted, for judging a jog that expired under the test
   * (hostJogExpiry). A refused frame gives no deadline (document 1 part 3: only accepted input is fresh input).
   */
  inputs: Array<{ sent: bigint; deadline: bigint; acked?: bigint }>;
  /** Frames the ingress counted refused: when each was built (its capture, host ns) and the reason counted. */
  refused: Array<{ sent: bigint; reason: string }>;
}

const J1 = 0;

/** The cell's first axis with what a jog of it needs from the configuration (harness/machine.ts). */
function jogAxis(d: object, skip: (note: string) => never) {
  const m = machineOf(d);
  const a = m.axes[J1]!;
  const c = needs(skip, a.config, 'the run has no machine configuration of this cell: the jog acceleration and arrest time are not known');
  return { a, jogAcceleration: c.jogAcceleration, arrestNs: c.arrestNs };
}

/**
 * Let `n` cycles of the cell's core run. Stepped where the cell runs on the stepped clock; in real time
 * the core runs them by itself, and the harness waits until its telemetry has that many more records
 * (record time, not the wall: a core that runs late is waited for, never judged by how long it took). The
 * wait is the harness's patience, not a bound of the documents: past it (5 s and ten times the cycles'
 * own time) the test goes on, and what the records then hold is judged as it is.
 */
async function cyclesOf(target: Target, client: ControlClient, drive: CellDriver, cycleNs: bigint, n: number): Promise<void> {
  if (drive.stepped) {
    await target.step!(n);
    return;
  }
  const from = await latestSequence(client);
  const cycleMs = Number(cycleNs) / 1e6;
  const until = Date.now() + 5_000 + 10 * n * cycleMs;
  await new Promise((r) => setTimeout(r, n * cycleMs));
  while ((await latestSequence(client, from)) < from + BigInt(n) && Date.now() <= until) {
    await new Promise((r) => setTimeout(r, Math.max(1, Math.min(20, (n * cycleMs) / 4))));
  }
}

/**
 * How many cycles apart a producer sends its frames: `wanted` on the stepped clock (no host time passes
 * between steps but the harness's own); in real time at most a quarter of the input age, as a pendant
 * keeps its input fresh whatever the cycle (a 10 ms cell's 50 cycles would be twice the LAN input age).
 */
function framePeriod(st: Stack, wanted: number): number {
  if (st.drive.stepped) return wanted;
  return Math.max(1, Math.min(wanted, Number(st.maxAgeNs / 4n / st.cycleNs)));
}

/**
 * A pendant's repeats of zero input in the background (in real time; nothing on the stepped clock, where no
 * input ages between the harness's steps), so that a test which reads and asks for a while needs no
 * input deadline of its own: the jog generation stays open as long as the pendant keeps it fresh (every
 * quarter of the input age, framePeriod), and a jog that expired because a repeat came late is judged the
 * host's (hostJogExpiry). The returned function stops the repeats and gives the last source_sequence sent.
 */
function keepFresh(st: Stack, s: Session, jg: bigint, from = 0n): () => Promise<bigint> {
  if (st.drive.stepped) return async () => from;
  let on = true;
  let seq = from;
  const periodMs = (framePeriod(st, Number.MAX_SAFE_INTEGER) * Number(st.cycleNs)) / 1e6;
  const loop = (async () => {
    while (on) {
      await send(st, frame(st, s, jg, ++seq, velocities(st, J1, 0)));
      if (on) await new Promise((r) => setTimeout(r, periodMs));
    }
  })().catch(() => undefined);
  return async () => {
    on = false;
    await loop;
    return seq;
  };
}

/**
 * Why the jog tests cannot jog this cell's first axis, or undefined: they command it in rad at 0.1 to
 * 0.2 rad/s (below max_velocity, the frame check of document 1) from where it rests, inside its limits.
 */
function jogUnfit(d: object): string | undefined {
  const a = machineOf(d).axes[J1]!;
  if (!a.rotary) return `the jog tests command the first axis in rad at 0.2 rad/s; this cell's ${a.id} is in ${a.unit}`;
  if (a.maxVelocity <= 0.25) return `the jog tests command 0.2 rad/s; ${a.id}'s max_velocity is ${a.maxVelocity}`;
  if (a.max < 0.5) return `the jog tests move ${a.id} up to about 0.4 rad; its upper limit is ${a.max}`;
  return undefined;
}

/**
 * Run `fn` on the file's cell (its fixtures `x`); skips where the target serves no independent jog lane or,
 * with `o.fit`, where the first axis cannot be jogged as the tests do. On the way out the grant is released
 * (stopped if it must be) and a stop's or an expired lease's drain let end, so the next test can acquire.
 */
async function withCell(x: CellFixtures, fn: (st: Stack) => Promise<void>, o: { expires?: boolean; fit?: boolean } = {}): Promise<void> {
  const clock = await readJogClock(x.client);
  x.skip(clock.socket === '', 'the target serves no independent jog lane (GET /v1/jog/clock socket empty)');
  if (o.fit !== false) {
    const why = jogUnfit(x.description);
    if (why) x.skip(why);
  }
  const d = x.description as unknown as { axes: AxisD[]; cycle_ns: bigint; max_jog_input_age_ns?: bigint };
  // Describe's field list is not shown (document 1 part 4): without the figure, the jog clock's, or the
  // configured or link profile's input age (document 1 part 8).
  const age = d.max_jog_input_age_ns ?? (clock.max_input_age_ns as bigint | undefined) ?? machineOf(d).configuredInputAgeNs ?? LINK_DEFAULTS.lan.inputAgeNs;
  const cycleNs = BigInt(d.cycle_ns);
  const sender = new JogSender(x.target.address);
  const st: Stack = {
    target: x.target,
    client: x.client,
    cell: x.cell,
    drive: x.drive,
    described: x.description,
    skip: x.skip,
    axes: d.axes,
    cycleNs,
    maxAgeNs: BigInt(age),
    sender,
    incarnation: clock.incarnation as string,
    step: (n) => cyclesOf(x.target, x.client, x.drive, cycleNs, n),
    base: await readJogIngress(x.client),
    inputs: [],
    refused: [],
  };
  const from = await eventCursor(st.client);
  try {
    await fn(st);
  } catch (e) {
    // A test that lets its jog expire on purpose (o.expires) judges the expiry itself.
    throw (o.expires ? undefined : await hostJogExpiry(st, from, e)) ?? e;
  } finally {
    sender.close();
    await leave(st);
  }
}

/** The test's grants released (or stopped), and a drain it left let end: the next test meets an idle cell. */
async function leave(st: Stack): Promise<void> {
  await st.cell.cleanup(); // the held grant's keeper stops with the test, failed or not
  await st.drive.status((s) => !draining(s), DRAIN_MS).catch(() => undefined);
}

/**
 * A jog test that failed after a jog of its stack expired (document 1 part 3 "Jog session": the input
 * deadline passed in host time, which runs on whatever clock the core does): when the core expired the
 * jog at host time past a deadline no earlier than the freshest one the harness's inputs had given it
 * by then, the harness let its input go stale: its next frame or step came later than the input age
 * allows, a slow host, so the failure is HIL_ERR_HOST_TOO_SLOW with the figures. An expiry before that
 * deadline, or at a deadline the core shortened, is the target's and the failure stands (so is any
 * failure with no expiry). The tests that let a jog expire on purpose judge it themselves.
 */
async function hostJogExpiry(st: Stack, from: bigint, e: unknown): Promise<HarnessError | undefined> {
  if (verdictOfError(e) !== 'fail') return undefined;
  let all: CellEvent[];
  try {
    all = await eventsSince(st.client, from);
  } catch {
    return undefined;
  }
  const evs = ofType(all, 'jog_expired');
  // The event log lost events of this test (its ring wrapped while a slow host stretched the test: a held
  // grant's renewals alone add ten events a second): a jog_expired may be among them, so the harness's own
  // inputs are judged instead.
  if (evs.length === 0 && ofType(all, 'events_dropped').length > 0) return staleByHost(st, e);
  for (const ev of evs) {
    const j = jogOf(ev);
    const at = BigInt(j.host_ns as bigint);
    const deadline = BigInt(j.input_deadline_host_ns as bigint);
    // The freshest deadline of the inputs the target had acknowledged before this one passed: a frame the
    // ingress counted only after the deadline (the harness sent it late) cannot have kept the jog alive.
    const given = st.inputs.filter((x) => (x.acked ?? x.sent) <= deadline).reduce((m, x) => (x.deadline > m ? x.deadline : m), 0n);
    if (given === 0n || at <= deadline || deadline < given) continue;
    const last = st.inputs.filter((x) => x.sent <= at).reduce((m, x) => (x.sent > m ? x.sent : m), 0n);
    const first = String((e as Error)?.message ?? e).split('\n')[0];
    return new HarnessError(
      'HIL_ERR_HOST_TOO_SLOW',
      `document 1 part 3 "Jog session" (input deadline): jog generation ${String(j.jog_generation)} expired at host time ${ms(at - deadline)} ms past the input deadline the harness's own freshest input gave it (sent ${ms(at - last)} ms before the expiry, input age ${ms(st.maxAgeNs)} ms): the harness did not send its next input in time, a slow host, not a verdict on the target; the check that failed: ${first}`,
      { cause: e, detail: { rule: 'jog input deadline', late_ms: ms(at - deadline), last_input_ms_before: ms(at - last) } },
    );
  }
  return undefined;
}

/**
 * Hold a grant (renewed in host time), enable every axis and arm, through the CellDriver (readyDriven: the
 * drives stepped to enabled on a stepped cell); skips where motion is not allowed on the target.
 */
async function ready(st: Stack): Promise<Session> {
  needsMotion({ skip: st.skip }, st.target);
  const { s } = await readyDriven(st.cell, st.drive, { axes: st.axes.length, homeMask: 0 });
  return s;
}

/** A fenced operation, the cell moved on until its reply comes (the `op` fixture's way). */
const fenced = (st: Stack, operation: string, s: Pick<Session, 'session' | 'generation'>, fields?: Record<string, unknown>) => st.drive.answer(st.cell.fenced(operation, s, fields), 5);

/**
 * A check that holds only while a deadline of host time has not passed (an input deadline): in real time
 * through hostBound, so a harness that got to it late is HIL_ERR_HOST_TOO_SLOW, never FAIL; on the stepped
 * clock the deadline is met by construction (nothing expires between the harness's steps), and the check
 * stands whatever the host did.
 */
function inTime<T>(st: Stack, o: Parameters<typeof hostBound>[0], fn: () => Promise<T>): Promise<T> {
  return st.drive.stepped ? fn() : hostBound(o, fn);
}

function beginFields(st: Stack, mask: number, deadlineAfterNs = 200_000_000n) {
  const origin = hostNs();
  const limit = origin + st.maxAgeNs;
  st.inputs.push({ sent: origin, deadline: origin + deadlineAfterNs < limit ? origin + deadlineAfterNs : limit });
  return { axis_mask: mask, source_origin_host_ns: origin, deadline_host_ns: origin + deadlineAfterNs, clock_incarnation: st.incarnation };
}

async function begin(st: Stack, s: Session, mask: number): Promise<bigint> {
  const f = beginFields(st, mask);
  const r = await beginInTime(f, () => fenced(st, 'begin_jog', s, f));
  expect(r.reply.handle).toBeGreaterThan(0n);
  return r.reply.handle!;
}

const velocities = (st: Stack, axis: number, v: number) => st.axes.map((_, i) => (i === axis ? v : 0));

function frame(st: Stack, s: Session, jg: bigint, seq: bigint, v: number[], over: Partial<JogFrame> = {}): Buffer {
  const now = hostNs();
  const f = { session: s.session, generation: s.generation, jogGeneration: jg, sourceSequence: seq, captureHostNs: now, velocity: v, ...over };
  const buf = encodeJogFrame(f);
  built.set(buf, { sent: now, deadline: BigInt(f.captureHostNs) + st.maxAgeNs });
  return buf;
}

/** The input deadline each frame built by `frame` would give when accepted, and when it was built. */
const built = new WeakMap<Buffer, { sent: bigint; deadline: bigint }>();

/**
 * The ingress counters since the test began (received, accepted, refused and each reason's count): on a
 * stack of the test's own they are the counters themselves.
 */
function since(st: Stack, g: Ingress): Ingress {
  const b = st.base;
  const was = (b.refused_by_reason ?? {}) as Record<string, bigint>;
  const now = (g.refused_by_reason ?? {}) as Record<string, bigint>;
  const by: Record<string, bigint> = {};
  for (const k of Object.keys(now)) if (now[k] !== (was[k] ?? 0n)) by[k] = now[k]! - (was[k] ?? 0n);
  const d = (k: string) => (g[k] as bigint) - (b[k] as bigint);
  return { ...g, received: d('received'), accepted: d('accepted'), refused: d('refused'), refused_by_reason: by };
}

/**
 * Send one frame and wait until the ingress has counted it; an accepted one is noted as input given. The
 * counters are the test's own (since).
 */
async function send(st: Stack, buf: Buffer): Promise<Ingress> {
  const before = await readJogIngress(st.client);
  await st.sender.send(buf);
  const after = await waitIngress(st.client, (before.received as bigint) + 1n);
  const input = built.get(buf);
  if (input && (after.accepted as bigint) > (before.accepted as bigint)) st.inputs.push({ ...input, acked: hostNs() });
  else if (input && (after.refused as bigint) > (before.refused as bigint)) {
    const was = (before.refused_by_reason ?? {}) as Record<string, bigint>;
    const now = (after.refused_by_reason ?? {}) as Record<string, bigint>;
    st.refused.push({ sent: input.sent, reason: Object.keys(now).find((k) => now[k] !== was[k]) ?? '' });
  }
  return since(st, after);
}

const ofType = (events: CellEvent[], type: string) => events.filter((e) => e.type === type);
const jogOf = (e: CellEvent) => e.jog as Record<string, unknown>;
const cpu = (a: AxisD) => Number(a.counts_per_unit) * Number(a.sign);
/** Record time between two telemetry records (t_ns, host monotonic ns of each cycle; core time on the stepped clock). */
type Rec = Awaited<ReturnType<typeof recordsSince>>[number];
const between = (a: Rec, b: Rec): bigint => b.t_ns - a.t_ns;

/**
 * The input expiry after the core moved under the input (the input expiry test): jog_expired never early,
 * jog_ramping, the session closed in the records with the ramp to rest within the arrest time (record
 * time), and the expired generation taking no more input.
 */
async function expiredAsDocumented(st: Stack, s: Session, jg: bigint, j: Record<string, unknown>, t0: bigint, cursor: bigint, arrestNs: bigint): Promise<void> {
  while (hostNs() <= (j.InputDeadlineHostNs as bigint) + 5_000_000n) await new Promise((r) => setTimeout(r, 10));
  await st.step(300);
  const ev = await eventsSince(st.client, cursor);
  expect(ofType(ev, 'jog_expired')).toHaveLength(1);
  const expired = jogOf(ofType(ev, 'jog_expired')[0]!);
  expect(expired.jog_generation).toBe(jg);
  // never early: the core saw host time past the input deadline
  expect(String(expired.input_deadline_host_ns)).toBe(String(j.InputDeadlineHostNs));
  expect((expired.host_ns as bigint) > (j.InputDeadlineHostNs as bigint)).toBe(true);
  expect(ofType(ev, 'jog_ramping')).toHaveLength(1);
  expect(ofType(ev, 'jog_end')).toHaveLength(0); // expiry is reported as jog_expired, not jog_end
  const recs = await recordsSince(st.client, t0);
  const k = recs.findIndex((r) => r.jog_session_open === 0);
  expect(k).toBeGreaterThanOrEqual(1);
  expect(recs[k - 1]).toMatchObject({ jog_session_open: 1, jog_has_input: 1 });
  expect(recs[k]).toMatchObject({ jog_has_input: 0, jog_ramping: 1, jog_generation: jg });
  // In real time a record's t_ns is the host time of its cycle (document 1 part 2), the time base of the
  // input deadline it carries (jog_input_deadline_host_ns): the cycle that closed the session ran at most one
  // cycle before the deadline of the last open one, never earlier. Not on the stepped clock (t_ns is core
  // time, which host time does not follow; the event's host_ns above says it) nor where the records' t_ns
  // run on another clock (a replay's recorded one: TargetAbilities hostTimedRecords).
  if (!st.drive.stepped && st.target.abilities.hostTimedRecords) expect(recs[k]!.t_ns + st.cycleNs, 'the closing cycle not a cycle before the input deadline').toBeGreaterThan(recs[k - 1]!.jog_input_deadline_host_ns);
  // the session closed while the axis moved under the input (a core that expired it before it moved has nothing to ramp)
  expect(recs[k - 1]!.ax[J1]!.target_velocity_counts_per_s, 'moving under the input when it expired').not.toBe(0);
  const rest = recs.findIndex((r, i) => i >= k && r.ax[J1]!.target_velocity_counts_per_s === 0);
  // found at all (-1, a target never at rest in the records, would pass the bound below)
  expect(rest, 'the target at rest in the records').toBeGreaterThanOrEqual(k);
  // at rest within the arrest time, in record time (whole cycles of cycle_ns on the stepped clock)
  expect(between(recs[k]!, recs[rest]!)).toBeLessThanOrEqual(arrestNs);
  expect(await readJog(st.client)).toMatchObject({ SessionOpen: 0n, StateReason: 7n, Active: 0n });
  // the expired generation takes no more input (jog_session_stale; control_session_stale if a renewal
  // of the 500 ms lease came too late on a starved machine: refused either way)
  const after = await send(st, frame(st, s, jg, 2n, velocities(st, J1, 0.2)));
  expect(after).toMatchObject({ accepted: 1n, refused: 1n });
  expect(['jog_session_stale', 'control_session_stale']).toContain(Object.keys(after.refused_by_reason as object)[0]);
}

describe('observations', () => {
  test(
    'GET /v1/jog/clock, GET /v1/jog and GET /v1/jog/ingress answer without a session; jog.sock is a socket beside control.sock',
    covers('endpoint:GET /v1/jog/clock', 'endpoint:GET /v1/jog', 'endpoint:GET /v1/jog/ingress', 'field:LocalJogClock.incarnation', 'field:JogObservation.StateReason', 'field:JogObservation.ControlReason', 'field:JogObservation.UpdateReason', 'rule:transport.jog_socket'),
    async ({ client, target, description }) => {
      const clock = await readJogClock(client);
      expect(clock.incarnation).toMatch(/^[0-9a-f]{32}$/);
      expect((await readJogClock(client)).incarnation).toBe(clock.incarnation); // stable while the service runs
      const jog = await readJog(client);
      for (const k of ['StateReason', 'ControlReason', 'UpdateReason']) expect(typeof jog[k] === 'bigint' || typeof jog[k] === 'number', k).toBe(true);
      const ingress = await readJogIngress(client);
      expect(ingress).toMatchObject({ served: true, max_frame_bytes: 4096n });
      if (target.name === 'sim') expect(statSync(join(dirname(target.address), 'jog.sock')).isSocket()).toBe(true);
      const caps = (description as unknown as { capabilities: Array<{ name: string; state: string; transport: string }> }).capabilities;
      expect(caps.find((c) => c.name === 'update_jog')).toEqual({ name: 'update_jog', state: 'implemented', transport: 'datagram on jog.sock, or WebSocket on remote GET /v1/jog' });
    },
  );

  test(
    'LocalJogClock carries the host monotonic clock, the input age and the frame bounds; the ingress counts by reason',
    profile('profile:jog.observations'),
    async ({ client, description }) => {
      const before = hostNs();
      const c = await readJogClock(client);
      const after = hostNs();
      expect(c.clock).toBe('CLOCK_MONOTONIC');
      expect(c.now_host_ns as bigint).toBeGreaterThanOrEqual(before);
      expect(c.now_host_ns as bigint).toBeLessThanOrEqual(after);
      // the input-age ceiling the cell was configured with (document 1 part 8: cell configuration; LAN 250 ms, internet 750 ms)
      const age = machineOf(description).configuredInputAgeNs;
      expect(age, `link profile ${String(description.link_profile)} has no documented default and the run has no configuration`).toBeDefined();
      expect(c).toMatchObject({ max_input_age_ns: age, frame_version: 1n, max_frame_bytes: 4096n, socket: 'jog.sock' });
      expect(description.max_jog_input_age_ns).toBe(age);
      const j = await readJog(client);
      expect(Object.keys(j).sort()).toEqual(
        ['Active', 'AxisMask', 'CommandedVelocity', 'ControlReason', 'DeadlineHostNs', 'HasInput', 'IndependentAvailable', 'InputDeadlineHostNs', 'JogGeneration', 'LimitedAxisMask', 'Mode', 'NowHostNs', 'Ramping', 'SessionOpen', 'SourceOriginHostNs', 'SourceSequence', 'StateReason', 'TargetVelocity', 'UpdateReason'].sort(),
      );
    },
  );
});

describe('begin_jog, end_jog and the jog generation', () => {
  test(
    'begin_jog refusals: required fields, clock incarnation (empty or other), deadline not after origin, not armed',
    covers('rule:op.begin_jog.required', 'reason:jog_clock_incarnation_mismatch', 'field:Response.native_jog_result', 'field:Request.clock_incarnation'),
    async ({ cell, op }) => {
      const s = await cell.hold();
      const clock = await readJogClock(cell.client);
      const origin = hostNs();
      const ok = { axis_mask: 1, source_origin_host_ns: origin, deadline_host_ns: origin + 200_000_000n, clock_incarnation: clock.incarnation };
      for (const k of Object.keys(ok)) {
        const { [k]: _drop, ...rest } = ok as Record<string, unknown>;
        const r = await op('begin_jog', s, rest);
        expect(r.status, k).toBe(409);
        expect(r.label, k).toBe('invalid_request_envelope');
      }
      for (const inc of ['', '0'.repeat(32)]) {
        const r = await op('begin_jog', s, { ...ok, clock_incarnation: inc });
        expect(r.status).toBe(409);
        expect(r.label).toBe('jog_clock_incarnation_mismatch');
        expect(r.reply.native_jog_result).toMatchObject({ ControlReason: 4n, SessionOpen: 0n });
      }
      const d = await op('begin_jog', s, { ...ok, deadline_host_ns: origin });
      expect([d.status, d.label]).toEqual([409, 'jog_clock_deadline_invalid']);
      expect(d.reply.native_jog_result).toMatchObject({ ControlReason: 13n });
      // every check passes but the core is not armed
      const n = await op('begin_jog', s, { ...ok, source_origin_host_ns: hostNs(), deadline_host_ns: hostNs() + 200_000_000n });
      expect([n.status, n.label]).toEqual([409, 'not_ready']);
      expect(n.reply.native_result).toMatchObject({ Result: 1, Reason: 2 });
      expect(n.reply.native_jog_result).toMatchObject({ ControlReason: 1n });
    },
  );

  test(
    'begin_jog clock checks, each bound from both sides: deadline not after origin, origin in the future, deadline passed',
    profile('profile:jog.begin_deadline_invalid', 'profile:jog.begin_input_future', 'profile:jog.begin_input_stale'),
    async ({ cell, op }) => {
      const s = await cell.hold();
      const clock = await readJogClock(cell.client);
      const send = async (origin: bigint, deadline: bigint) => {
        const r = await op('begin_jog', s, { axis_mask: 1, source_origin_host_ns: origin, deadline_host_ns: deadline, clock_incarnation: clock.incarnation });
        return { status: r.status, label: r.label, control: (r.reply.native_jog_result as { ControlReason?: bigint } | undefined)?.ControlReason };
      };
      const SEC = 1_000_000_000n;
      // The cell is not armed: a begin_jog that passes every clock check is refused by the core (not_ready),
      // the other side of each bound.
      const passed = { status: 409, label: 'not_ready', control: 1n };
      // Deadline equal to the origin: invalid; one nanosecond after it passes this check (and, long past, is stale).
      const o1 = hostNs();
      expect(await send(o1, o1)).toEqual({ status: 409, label: 'jog_clock_deadline_invalid', control: 13n });
      expect(await send(o1, o1 + 1n)).toEqual({ status: 409, label: 'jog_clock_input_stale', control: 14n });
      // Checked first: an origin in the future with a deadline before it is still deadline_invalid.
      const f = hostNs() + 10n * SEC;
      expect(await send(f, f - 1n)).toEqual({ status: 409, label: 'jog_clock_deadline_invalid', control: 13n });
      // An origin ahead of the host clock: future; an origin read from the host clock just before: accepted.
      expect(await send(hostNs() + 10n * SEC, hostNs() + 20n * SEC)).toEqual({ status: 409, label: 'jog_clock_input_future', control: 25n });
      const o2 = hostNs();
      expect(await send(o2, o2 + SEC)).toEqual(passed);
      // A deadline already passed: stale; one still ahead: accepted.
      const o3 = hostNs() - 2n * SEC;
      expect(await send(o3, hostNs() - 1n)).toEqual({ status: 409, label: 'jog_clock_input_stale', control: 14n });
      expect(await send(o3, hostNs() + SEC)).toEqual(passed);
    },
  );

  test(
    'begin_jog opens a new jog generation (handle), jog_begin; end_jog needs the exact current generation, jog_end',
    covers('rule:jog_session.begin_opens_generation', 'rule:jog_session.end_closes', 'rule:op.end_jog.exact_generation', 'event:jog_begin', 'event:jog_end'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
        const s = await ready(st);
        const cursor = await eventCursor(st.client);
        // Generations run on across the file's tests: the last one issued (the observation keeps it after
        // it ended, docs/profile.md "Jog") is where this test's count starts (1 on a stack of its own).
        const last = (await readJog(st.client)).JogGeneration as bigint;
        const jg = await begin(st, s, 1 << J1);
        expect(jg).toBe(last + 1n);
        // In real time the generation must stay open through the reads and refusals below: a pendant's zero
        // repeats keep it so (no frame is needed on the stepped clock, where nothing runs between steps).
        const pendant = keepFresh(st, s, jg);
        try {
          // The two cycles first: the generation's first input deadline (200 ms after its origin) is host
          // time on the stepped clock too, and a read before the step was time the deadline ran on.
          await st.step(2);
          const obs = await readJog(st.client);
          expect(obs).toMatchObject({ JogGeneration: jg, SessionOpen: 1n, AxisMask: 1n, Mode: 1n });
          const rec = (await recordsSince(st.client, (await latestSequence(st.client)) - 1n)).at(-1)!;
          expect(rec).toMatchObject({ jog_generation: jg, jog_session_open: 1, jog_axis_mask: 1, active_mode: 3 });
          for (const bad of [0n, jg + 1n]) {
            const r = await fenced(st, 'end_jog', s, { jog_generation: bad });
            expect([r.status, r.label]).toEqual([409, 'jog_session_stale']);
            expect(r.reply.native_jog_result).toMatchObject({ SessionOpen: 1n, JogGeneration: jg });
          }
        } finally {
          await pendant();
        }
        const e = await fenced(st, 'end_jog', s, { jog_generation: jg });
        expect([e.status, e.reply.handle]).toEqual([200, jg]);
        const again = await fenced(st, 'end_jog', s, { jog_generation: jg });
        expect([again.status, again.label]).toEqual([409, 'jog_session_stale']);
        const next = await begin(st, s, 1 << J1);
        expect(next).toBe(jg + 1n); // a new generation, never a reused one
        const ev = await eventsSince(st.client, cursor);
        expect(ofType(ev, 'jog_begin').map((x) => jogOf(x).jog_generation)).toEqual([jg, next]);
        expect(ofType(ev, 'jog_end').map((x) => [jogOf(x).jog_generation, jogOf(x).why])).toEqual([[jg, 'end_jog']]);
      });
    },
  );

  test('begin_jog while native Home runs on the axes: mode_conflict', covers('reason:mode_conflict'), async ({ cell, client, description, drive, target, skip }) => {
    const axis = needs(skip, machineOf(description).homeable[0], 'the cell has no axis with native Home (Describe native_home)');
    const H = axis.bit;
    needsMotion({ skip }, target);
    const s = await cell.hold({ requested_lease_ms: 10_000 });
    const clock = await readJogClock(client);
    const beginDuringHome = () => {
      const origin = hostNs();
      return cell.fenced('begin_jog', s, { axis_mask: H, source_origin_host_ns: origin, deadline_host_ns: origin + 200_000_000n, clock_incarnation: clock.incarnation });
    };
    const conflict = (r: Awaited<ReturnType<typeof beginDuringHome>>) => {
      expect([r.status, r.label]).toEqual([409, 'mode_conflict']);
      expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 3 });
      expect(r.reply.native_jog_result).toMatchObject({ ControlReason: 2n, SessionOpen: 0n });
    };
    if (drive.stepped) {
      // The Home runs only as the test steps the core: two cycles in, it is certainly under way.
      const home = cell.fenced('home', s, { axis_mask: H });
      await target.step!(2);
      conflict(await beginDuringHome());
      // Step until the Home's reply is in (the sim's native Home takes a fraction of a second of core time).
      expect(await stepUntilSettled(target, home, 100, 2000), 'Home answered').toBe(true);
      expect((await home).status).toBe(200);
      return;
    }
    // In real time the Home runs on its own and may end before begin_jog reaches the core (the reference
    // drives home in 200 ms): the answer is judged against what the records say of the time the begin_jog
    // was in flight. The Home is under way while its axis is in homing mode (CiA 402 modes of operation
    // display 6, the record's mode_display, document 1 part 2); a begin_jog sent and answered while every
    // record of that time shows it so reached the core during the Home, and must be mode_conflict. One
    // whose flight outlasted the Home says nothing (the Home may have ended first): tried again, three times
    // at most, then HIL_ERR_HOST_TOO_SLOW with the figures.
    const homing = (r: Rec) => r.ax[axis.index]!.mode_display === 6;
    let flights: string[] = [];
    for (let attempt = 1; ; attempt++) {
      const t0 = await latestSequence(client);
      const home = cell.fenced('home', s, { axis_mask: H });
      let seen = false;
      for (const until = Date.now() + 5_000; !seen && Date.now() < until; ) {
        seen = (await recordsSince(client, t0)).some(homing);
        if (!seen) await new Promise((res) => setTimeout(res, 2));
      }
      const sent = hostNs();
      const r = seen ? await beginDuringHome() : undefined;
      const answered = hostNs();
      const h = await drive.answerWithin(home, 60_000);
      expect(h.status, h.reply.error).toBe(200);
      skip(!seen, 'no record showed the Home under way (mode_display 6, CiA 402 homing) before its reply: when begin_jog reaches the core during it cannot be told on this target');
      const during = (await recordsSince(client, t0)).filter((x) => x.t_ns >= sent && x.t_ns <= answered);
      const through = during.length > 0 && during.every(homing);
      if (through || r!.label === 'mode_conflict') {
        conflict(r!);
        return;
      }
      flights = [...flights, `${ms(answered - sent)} ms (answered ${r!.status} ${r!.label ?? ''})`];
      if (attempt >= 3) {
        throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `document 1 part 4 begin_jog (mode_conflict while native Home runs): in ${attempt} tries the begin_jog's flight outlasted the Home, so it may have reached the core after the Home ended (flights: ${flights.join(', ')}): a slow host, not a verdict on the target`, { detail: { rule: 'begin_jog during Home', flights: flights.join(', ') } });
      }
    }
  });

  // Needs a stack started without the jog datagram socket (hil serve --jog-socket off): a running service
  // cannot be made to stop serving its independent jog lane from outside, so the rule is observable only on
  // a stack of the test's own; a target that cannot start one (an external service, a rig) skips with its
  // reason.
  test(
    'without jog.sock there is no independent jog lane: independent_jog_unavailable; Describe marks update_jog unimplemented',
    covers('reason:independent_jog_unavailable'),
    async ({ variant }) => {
      const target = await variant({ jogSocket: 'off' });
      {
        const client = target.client();
        const d = (await client.describe()).reply.data as unknown as { binding: BindingInput; capabilities: Array<{ name: string; state: string; transport: string }> };
        expect(d.capabilities.find((c) => c.name === 'update_jog')).toEqual({ name: 'update_jog', state: 'unimplemented', transport: 'none' });
        expect(d.capabilities.find((c) => c.name === 'begin_jog')?.state).toBe('implemented');
        const cell = new Cell(client, d.binding);
        const s = await cell.hold();
        const clock = await readJogClock(client);
        const origin = hostNs();
        const r = await cell.fenced('begin_jog', s, { axis_mask: 1, source_origin_host_ns: origin, deadline_host_ns: origin + 200_000_000n, clock_incarnation: clock.incarnation });
        expect([r.status, r.label]).toEqual([409, 'independent_jog_unavailable']);
        expect(r.reply.native_jog_result).toMatchObject({ ControlReason: 3n, IndependentAvailable: 0n });
        expect(await readJogIngress(client)).toMatchObject({ served: false });
        await cell.cleanup();
      }
    },
  );
});

describe('jog.sock frames', () => {
  test(
    'an accepted frame ramps the axis at the jog acceleration; input 0 brings it to rest within jog.arrest_ns (telemetry)',
    covers('rule:transport.jog_socket', 'event:jog_ramping', 'rule:jog_session.expiry_event'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
        const { jogAcceleration, arrestNs } = jogAxis(st.described, skip);
        const s = await ready(st);
        const jg = await begin(st, s, 1 << J1);
        const a = st.axes[J1]!;
        const cursor = await eventCursor(st.client);
        const t0 = await latestSequence(st.client);
        // 0.2 rad/s at the axis's jog acceleration (3 rad/s^2 on the default cell: 67 ms); the producer
        // repeats its input every 30 ms of core time, as a pendant does, for 120 ms or the ramp and one
        // repeat more. Counted in cycles of the cell's cycle_ns (Describe): 30 cycles a frame on a 1 ms
        // cell, 120 on a 250 us one, where 120 cycles were only 30 ms, too short for the ramp.
        const cycleS = Number(st.cycleNs) / 1e9;
        const dv = jogAcceleration * cycleS; // one acceleration step (docs/profile.md "Jog", Motion)
        const rampCycles = Math.ceil(0.2 / dv);
        const every = framePeriod(st, Math.max(1, Math.round(0.03 / cycleS)));
        const inputFrames = Math.max(4, Math.ceil(rampCycles / every) + 1);
        const n1 = inputFrames * every;
        for (let k = 1; k <= inputFrames; k++) {
          const g = await send(st, frame(st, s, jg, BigInt(k), velocities(st, J1, 0.2)));
          expect(g).toMatchObject({ accepted: BigInt(k), refused: 0n });
          await st.step(every);
        }
        // then the input stops: zero velocity, still repeated, every 50 ms for 250 ms of core time (the
        // arrest time of the default cell and the plant's settling after it)
        const every0 = framePeriod(st, Math.max(1, Math.round(0.05 / cycleS)));
        const zeroFrames = Math.max(5, Math.ceil(Number(arrestNs + 50_000_000n) / Number(st.cycleNs) / every0));
        for (let k = inputFrames + 1; k <= inputFrames + zeroFrames; k++) {
          await send(st, frame(st, s, jg, BigInt(k), velocities(st, J1, 0)));
          await st.step(every0);
        }
        // The records up to here, and the generation ended before they are read: in real time a session left
        // without input while the harness reads would expire, and no expiry is what this test shows.
        const tEnd = await latestSequence(st.client);
        expect((await fenced(st, 'end_jog', s, { jog_generation: jg })).status).toBe(200);
        const recs = (await recordsSince(st.client, t0)).filter((r) => r.seq <= tEnd);
        const tv = recs.map((r) => r.ax[J1]!.target_velocity_counts_per_s / cpu(a));
        // The first cycle that took the input: on the stepped clock the first record after the frame (the
        // core takes input at its next cycle); in real time the core ran on its own between the reads, so it
        // is found in the records, and nothing moved before it.
        const k1 = recs.findIndex((r) => r.jog_generation === jg && r.jog_source_sequence >= 1n);
        if (st.drive.stepped) expect(k1).toBe(0);
        expect(k1, 'the cycle that took the first input').toBeGreaterThanOrEqual(0);
        for (let k = 0; k < k1; k++) expect(tv[k], `before the input, record ${k}`).toBe(0);
        // from the cycle that applied input 0 (the first zero frame) the target is at rest within arrest_ns
        const k2 = recs.findIndex((r) => r.jog_source_sequence > BigInt(inputFrames));
        expect(k2).toBeGreaterThanOrEqual(k1 + n1);
        // ramp: the first cycle moves at one acceleration step, and speed never grows faster than that per
        // cycle (the records' cycle numbers: one apart on the stepped clock; a real-time core that lost a
        // cycle owes one step per cycle it ran), to the rounding of two integer counts/s (a fixed 1e-3 rad/s
        // was a third of a step at 1 ms but more than a whole step at 250 us)
        expect(tv[k1]).toBeCloseTo(dv, 3);
        const rounding = 2 / Math.abs(cpu(a));
        for (let k = k1 + 1; k < k2; k++) {
          const cycles = Number(recs[k]!.cycle - recs[k - 1]!.cycle);
          if (st.drive.stepped) expect(cycles).toBe(1);
          expect(Math.abs(tv[k]! - tv[k - 1]!), `record ${k}`).toBeLessThanOrEqual(dv * cycles + rounding);
        }
        // at the commanded speed with the last input when the zero frame came (on the stepped clock, the
        // last cycle before it, n1 cycles after the first)
        const last = st.drive.stepped ? n1 - 1 : k2 - 1;
        expect(tv[last]).toBeCloseTo(0.2, 3);
        expect(recs[last]).toMatchObject({ jog_has_input: 1, jog_source_sequence: BigInt(inputFrames), jog_session_open: 1, active_mode: 3 });
        const rest = recs.findIndex((r, k) => k >= k2 && r.ax[J1]!.target_velocity_counts_per_s === 0);
        expect(rest, 'the target at rest in the records').toBeGreaterThanOrEqual(k2);
        // within arrest_ns in record time (on the stepped clock whole cycles of cycle_ns: at most arrest_ns / cycle_ns)
        expect(between(recs[k2]!, recs[rest]!)).toBeLessThanOrEqual(arrestNs);
        expect(recs[k2 + 1]!.jog_ramping).toBe(1);
        // and the drive itself has come to rest within the arrest time (plus the plant's settling)
        expect(Math.abs(recs.at(-1)!.ax[J1]!.velocity_actual_counts_per_s / cpu(a))).toBeLessThan(0.001);
        const ev = await eventsSince(st.client, cursor);
        expect(ofType(ev, 'jog_ramping')).toHaveLength(1);
        expect(ofType(ev, 'jog_expired')).toHaveLength(0);
      });
    },
  );

  test(
    'frames that are oversize, malformed, of another version, stale, out of order, for another grant or jog generation are refused, counted, and move nothing',
    profile('profile:jog.frame_refusals'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
        const s = await ready(st);
        const jg = await begin(st, s, 1 << J1);
        const opened = st.inputs.at(-1)!; // the begin's origin and input deadline
        const v = velocities(st, J1, 0.1);
        let seq = 5n; // the last accepted source_sequence
        const first = await send(st, frame(st, s, jg, seq, velocities(st, J1, 0)));
        const counted = hostNs();
        // The first frame must reach the ingress before the begin's input deadline (document 1 part 3 "Jog
        // session"): one counted after it was refused for the harness's lateness, not the target's.
        await hostBound(
          { rule: 'document 1 part 3 "Jog session": input before the begin\'s deadline', marginMs: Number(opened.deadline - opened.sent) / 1e6, measured: () => ({ ms: Number(counted - opened.sent) / 1e6, what: "from the begin's origin to the first frame counted" }) },
          async () => expect(first).toMatchObject({ accepted: 1n }),
        );
        // frames are built when sent (capture times stay fresh however slow the machine is); `next` is the
        // sequence an in-order frame carries, so each case is wrong in its one way only
        const next = () => seq + 1n;
        const cases: Array<[string, () => Buffer]> = [
          ['jog_frame_oversize', () => Buffer.concat([frame(st, s, jg, next(), v), Buffer.alloc(4097 - frame(st, s, jg, next(), v).length)])],
          ['jog_frame_malformed', () => frame(st, s, jg, next(), v).subarray(0, 79)],
          ['jog_frame_malformed', () => frame(st, s, jg, next(), v, { magic: 0x12345678 })],
          ['jog_frame_malformed', () => frame(st, s, jg, next(), v, { reserved: 1n })],
          ['jog_frame_malformed', () => frame(st, s, jg, next(), [...v, 0], {})],
          ['jog_frame_version', () => frame(st, s, jg, next(), v, { version: 2 })],
          ['control_session_stale', () => frame(st, s, jg, next(), v, { generation: s.generation + 1n })],
          ['control_session_stale', () => frame(st, s, jg, next(), v, { session: 'ab'.repeat(32) })],
          ['jog_session_stale', () => frame(st, s, jg + 1n, next(), v)],
          ['jog_frame_out_of_order', () => frame(st, s, jg, seq, v)],
          ['jog_frame_out_of_order', () => frame(st, s, jg, seq - 1n, v)],
          ['jog_clock_input_stale', () => frame(st, s, jg, next(), v, { captureHostNs: hostNs() - st.maxAgeNs - 1_000_000n })],
          ['jog_clock_input_future', () => frame(st, s, jg, next(), v, { captureHostNs: hostNs() + 10_000_000_000n })],
          ['jog_velocity_invalid', () => frame(st, s, jg, next(), velocities(st, J1, Number.NaN))],
          ['jog_velocity_invalid', () => frame(st, s, jg, next(), velocities(st, J1, Number(st.axes[J1]!.max_velocity) * 1.01))],
          // another axis than the session's, below its own max_velocity (a one-axis cell has none)
          ...(st.axes.length > 1
            ? [['jog_axis_outside_session', () => frame(st, s, jg, next(), velocities(st, 1, Math.min(0.1, Number(st.axes[1]!.max_velocity) / 2)))] as [string, () => Buffer]]
            : []),
        ];
        const expected: Record<string, bigint> = {};
        let kept = 0n; // zero frames that kept the session's input fresh (real time)
        for (const [label, make] of cases) {
          // On a real-time cell the session's input expires one input age after the last accepted frame,
          // and every later frame would be jog_session_stale first: a fresh zero frame before each case keeps
          // it open, as a pendant's repeats do. On the stepped clock no cycle runs (nothing expires) and the
          // cases follow one another as they are.
          const fresh = hostNs();
          if (!st.drive.stepped) {
            seq += 1n;
            kept += 1n;
            expect(await send(st, frame(st, s, jg, seq, velocities(st, J1, 0))), 'a fresh in-order zero frame').toMatchObject({ accepted: 1n + kept });
          }
          const g = await send(st, make());
          const counted = hostNs();
          expected[label] = (expected[label] ?? 0n) + 1n;
          // A frame counted more than the input age after it was built (or, in real time, after the input
          // that kept the session open) is stale by then, or its session expired, whatever else is wrong with
          // it: a mismatch after that is the harness's lateness, not the label under test.
          await hostBound(
            { rule: `document 1 part 3 "Jog session": ${label} on a frame inside the input age`, marginMs: Number(st.maxAgeNs) / 1e6, measured: () => ({ ms: Number(counted - fresh) / 1e6, what: st.drive.stepped ? 'from the frame built to it counted' : 'from the last fresh input to the frame counted' }) },
            async () => expect(g.refused_by_reason, label).toEqual(expected),
          );
        }
        const g = since(st, await readJogIngress(st.client));
        expect(g).toMatchObject({ received: BigInt(cases.length) + 1n + kept, accepted: 1n + kept, refused: BigInt(cases.length), last_accepted_sequence: seq });
        // none of the refused frames (all asking J1 for 0.1 rad/s) moved anything; keep the input fresh first
        expect(await send(st, frame(st, s, jg, ++seq, velocities(st, J1, 0)))).toMatchObject({ accepted: 2n + kept });
        await st.step(50);
        const j = await readJog(st.client);
        expect(j).toMatchObject({ SourceSequence: seq, SessionOpen: 1n });
        expect((j.CommandedVelocity as unknown[]).map(Number)).toEqual(st.axes.map(() => 0));
        expect((j.TargetVelocity as unknown[]).map(Number)).toEqual(st.axes.map(() => 0));
        // the next in-order, fresh frame is accepted
        expect(await send(st, frame(st, s, jg, ++seq, v))).toMatchObject({ accepted: 3n + kept });
        // input captured before the session's origin (a new generation, so its origin is recent)
        const f = beginFields(st, 1 << J1);
        const b2 = await fenced(st, 'begin_jog', s, f);
        expect(b2.status, b2.reply.error).toBe(200);
        const late = await send(st, frame(st, s, b2.reply.handle!, 1n, v, { captureHostNs: f.source_origin_host_ns - 1n }));
        const answered = hostNs();
        // Its capture time is one nanosecond before the origin, so it is also as old as the origin: a frame
        // that reached the ingress more than the input age after the origin is stale first (counted
        // jog_clock_input_stale), which says nothing about the origin check.
        await hostBound(
          { rule: 'document 1 part 3 "Jog session": input captured before the origin, inside the input age', marginMs: Number(st.maxAgeNs) / 1e6, measured: () => ({ ms: Number(answered - f.source_origin_host_ns) / 1e6, what: 'from the new origin to the frame answered' }) },
          async () => expect(late.refused_by_reason).toEqual({ ...expected, jog_capture_before_origin: 1n }),
        );
      });
    },
  );

  test(
    'input expiry: host time past the input deadline emits jog_expired and jog_ramping, closes the session, and motion ramps to rest (telemetry)',
    covers('event:jog_expired', 'event:jog_ramping', 'rule:jog_session.expiry_event', 'limit:lan_jog_input_age_ms'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
        // the input-age ceiling the cell was configured with (250 ms on the LAN profile, 750 ms on the internet one)
        const AGE = needs(skip, machineOf(st.described).configuredInputAgeNs, 'the cell\'s link profile has no documented input age and the run has no configuration');
        const { arrestNs } = jogAxis(st.described, skip);
        expect(st.maxAgeNs).toBe(AGE);
        const s = await ready(st);
        // the session's origin 100 ms ago, its deadline one input age after it
        const origin = hostNs() - 100_000_000n;
        const bf = { axis_mask: 1 << J1, source_origin_host_ns: origin, deadline_host_ns: origin + AGE, clock_incarnation: st.incarnation };
        const b = await beginInTime(bf, () => fenced(st, 'begin_jog', s, bf));
        const jg = b.reply.handle!;
        const cursor = await eventCursor(st.client);
        // captured 10 ms ago (after the origin): it expires one input age less 10 ms from now
        const capture = hostNs() - 10_000_000n;
        await send(st, frame(st, s, jg, 1n, velocities(st, J1, 0.2), { captureHostNs: capture }));
        const t0 = await latestSequence(st.client);
        const t0Read = hostNs();
        await st.step(1); // the core takes the input at its next cycle
        const j = await readJog(st.client);
        const captured = (await readJogIngress(st.client)).last_accepted_capture_host_ns as bigint;
        const read = hostNs();
        // Read past the input's deadline (a slow host), the session may have expired between the two reads
        // and the ingress forgotten its last input: the comparison then says nothing about the target.
        if (String(j.InputDeadlineHostNs) !== String(captured + AGE) && read > capture + AGE) {
          throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `document 1 part 3 "Jog session" (input deadline): the jog state and the ingress were read ${ms(read - capture - AGE)} ms after the input's deadline (input age ${ms(AGE)} ms), when the session may already have expired: a slow host, not a verdict on the target; they read InputDeadlineHostNs ${j.InputDeadlineHostNs} and last accepted capture ${captured}`, { detail: { rule: 'jog input deadline', late_ms: ms(read - capture - AGE) } });
        }
        expect(String(j.InputDeadlineHostNs)).toBe(String(captured + AGE));
        await st.step(99); // the axis moves under the input
        // What follows checks the input's expiry after the core moved under it: the session open with input,
        // then closed with its ramp (document 1 part 3 "Jog session"). It needs the cycles that take the
        // input and move the axis to run before the input deadline: on the stepped clock the harness's
        // steps, so they must be done by then; in real time the core runs them by itself, and what must come
        // before the deadline is the harness's read of where the records start (t0), or the records it reads
        // may begin after the session closed. When the harness got there only after the deadline (the frame
        // sent, the reads and the steps taken late by a slow host), the core may have expired the input before
        // anything moved, or before the records the test reads: what failed then is HIL_ERR_HOST_TOO_SLOW
        // with the figures. A target that breaks the rule with the harness in time still FAILs.
        const stepped = st.drive.stepped ? hostNs() : t0Read;
        try {
          await expiredAsDocumented(st, s, jg, j, t0, cursor, arrestNs);
        } catch (e) {
          if (verdictOfError(e) !== 'fail' || stepped <= capture + AGE) throw e;
          throw new HarnessError(
            'HIL_ERR_HOST_TOO_SLOW',
            `document 1 part 3 "Jog session" (input expiry): ${st.drive.stepped ? 'the steps that let the core take the input and move under it ended' : 'the harness read where the records start'} ${ms(stepped - capture - AGE)} ms after the input's deadline (${ms(stepped - capture)} ms after its capture, input age ${ms(AGE)} ms), so the core may have expired it before anything moved: a slow host, not a verdict on the target; the check that failed: ${String((e as Error)?.message ?? e).split('\n')[0]}`,
            { cause: e, detail: { rule: 'jog input deadline', late_ms: ms(stepped - capture - AGE) } },
          );
        }
      }, { expires: true });
    },
  );

  test(
    'position limit: the jog slows and stops inside min_position, jog_limited, accepted, no overshoot (telemetry)',
    covers('event:jog_limited', 'rule:jog_session.limited_is_accepted'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      await withCell(
        { cell, client, description, drive, op, target, skip },
        async (st) => {
          // The axis whose lower limit is nearest below 0 (J3 of the default cell, -1.2 rad).
          const m = machineOf(st.described);
          const near = [...m.axes].filter((x) => x.min < 0 && x.max > 0).sort((x, y) => y.min - x.min)[0];
          const J3 = needs(skip, near, `the test jogs an axis from 0 down to its lower limit; no axis of this cell (${m}) has 0 inside its limits`).index;
          const s = await ready(st);
          const a = st.axes[J3]!;
          const cursor = await eventCursor(st.client);
          const t0 = await latestSequence(st.client);
          // Where the axis stands (0 on a cell just started; a cell the run shares stands where its last user
          // left it, and this test brings it back at the end). Read before the begin, whose first input
          // deadline (200 ms) the first frame must beat.
          const start = (await recordsSince(st.client, t0 - 1n))[0]!.ax[J3]!.position / cpu(a);
          const room = start - near!.min;
          // (A shared cell whose axis a run left at the limit has no room to show it: that is the one case skipped.)
          skip(room < 0.001, `${a.id} stands ${room} ${near!.unit} above its lower limit: no room to show the jog slowing toward it`);
          const jg = await begin(st, s, 1 << J3);
          // From 0 to min_position in about 4.3 s of core time (-0.28 rad/s to -1.2 rad on the default cell),
          // below the axis's max_velocity; fresh input every 50 cycles like a pendant (in real time at least
          // every quarter of the input age).
          const speed = Math.min(room / 4.3, near!.maxVelocity / 2);
          const every = framePeriod(st, 50);
          const frames = Math.ceil(((room / speed + 0.45) * 1e9) / Number(st.cycleNs) / every);
          let seq = 0n;
          for (let k = 0; k < frames; k++) {
            await send(st, frame(st, s, jg, ++seq, velocities(st, J3, -speed)));
            await st.step(every);
          }
          // The cell as the last input left it (the records up to here, the jog observation), then the
          // generation ended: in real time an unattended session would expire while the records are read,
          // and an expiry is not what this test is about.
          const tEnd = await latestSequence(st.client);
          expect(await readJog(st.client)).toMatchObject({ StateReason: 9n, LimitedAxisMask: 1n << BigInt(J3) });
          expect((await fenced(st, 'end_jog', s, { jog_generation: jg })).status).toBe(200);
          const ev = await eventsSince(st.client, cursor);
          expect(ofType(ev, 'jog_limited')).toHaveLength(1);
          expect(jogOf(ofType(ev, 'jog_limited')[0]!)).toMatchObject({ jog_generation: jg, limited_axis_mask: 1n << BigInt(J3) });
          expect(ofType(ev, 'fault_latched')).toHaveLength(0);
          const recs = (await recordsSince(st.client, t0)).filter((r) => r.seq <= tEnd);
          // logical positions (counts through counts_per_unit and sign from Describe)
          const lowest = Math.min(...recs.map((r) => r.ax[J3]!.position / cpu(a)));
          const lowestTarget = Math.min(...recs.map((r) => r.ax[J3]!.target / cpu(a)));
          expect(lowestTarget).toBeGreaterThanOrEqual(Number(a.min_position));
          expect(lowest).toBeGreaterThanOrEqual(Number(a.min_position));
          // it did get there: within a thousandth of a radian of the limit, at rest
          expect(recs.at(-1)!.ax[J3]!.target / cpu(a)).toBeLessThan(Number(a.min_position) + 0.001);
          expect(recs.at(-1)!.ax[J3]!.target_velocity_counts_per_s).toBe(0);
          // accepted, not a failure: still armed, the session open, the input current
          expect(recs.at(-1)).toMatchObject({ armed: 1, jog_session_open: 1, jog_has_input: 1, execution_fault_reasons: 0 });
          // Back to where it stood, in a generation of its own (inward from a limit is accepted,
          // docs/profile.md "Jog" Limits), so that a cell the run shares (an external service, a rig) meets
          // its next user with the axis where this test found it. Housekeeping, not a check: nothing of it
          // is asserted. Not on the stepped clock: that is the sim target's stack of this file, which no
          // later test of the file jogs on this axis and which ends with the file.
          if (st.drive.stepped) return;
          const f = beginFields(st, 1 << J3);
          const home = (await fenced(st, 'begin_jog', s, f)).reply.handle;
          if (home === undefined) return;
          const back = Math.ceil(((room / speed) * 1e9) / Number(st.cycleNs) / every);
          seq = 0n;
          for (let k = 0; k < back; k++) {
            await send(st, frame(st, s, home, ++seq, velocities(st, J3, speed)));
            await st.step(every);
          }
          await fenced(st, 'end_jog', s, { jog_generation: home });
          await st.step(every);
        },
        { fit: false },
      );
    },
  );
});

describe('what stops a jog', () => {
  test('halt ramps the jog to rest, retires the generation, keeps Enable and Arm', covers('rule:jog_session.halt_retires'), async ({ cell, client, description, drive, op, target, skip }) => {
    await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
      const s = await ready(st);
      const jg = await begin(st, s, 1 << J1);
      const cursor = await eventCursor(st.client);
      await send(st, frame(st, s, jg, 1n, velocities(st, J1, 0.2)));
      await st.step(framePeriod(st, 50));
      await send(st, frame(st, s, jg, 2n, velocities(st, J1, 0.2))); // fresh input when the halt arrives
      const t0 = await latestSequence(st.client);
      expect((await fenced(st, 'halt', s)).status).toBe(200);
      await st.step(250);
      const recs = await recordsSince(st.client, t0);
      // The first cycle after the halt retired the generation: the first record after it on the stepped
      // clock (the halt is taken between steps); in real time the core ran on between the reads.
      const kh = recs.findIndex((r) => r.jog_session_open === 0);
      if (st.drive.stepped) expect(kh).toBe(0);
      expect(kh, 'the generation retired in the records').toBeGreaterThanOrEqual(0);
      expect(recs[kh]!.ax[J1]!.target_velocity_counts_per_s).not.toBe(0); // decelerating, not a jump to hold
      expect(recs.at(-1)!.ax[J1]!.target_velocity_counts_per_s).toBe(0);
      expect(recs.at(-1)).toMatchObject({ armed: 1, jog_session_open: 0, active_mode: 0 });
      const ev = await eventsSince(st.client, cursor);
      expect(ofType(ev, 'jog_end').map((e) => jogOf(e).why)).toEqual(['halt']);
      expect((await send(st, frame(st, s, jg, 3n, velocities(st, J1, 0.2)))).refused_by_reason).toEqual({ jog_session_stale: 1n });
      const e = await fenced(st, 'end_jog', s, { jog_generation: jg });
      expect([e.status, e.label]).toEqual([409, 'jog_session_stale']);
    });
  });

  test('stop during a jog: jog retired, drives disabled, every output OFF (telemetry)', covers('rule:jog_session.end_closes'), async ({ cell, client, description, drive, op, target, skip }) => {
    await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
      const s = await ready(st);
      const jg = await begin(st, s, 1 << J1);
      await send(st, frame(st, s, jg, 1n, velocities(st, J1, 0.2)));
      await st.step(framePeriod(st, 50));
      const cursor = await eventCursor(st.client);
      const t0 = await latestSequence(st.client);
      await send(st, frame(st, s, jg, 2n, velocities(st, J1, 0.2))); // fresh input when the stop arrives
      const stop = st.cell.fenced('stop', s);
      await st.step(400);
      expect((await stop).status).toBe(200);
      const recs = await recordsSince(st.client, t0);
      const last = recs.at(-1)!;
      expect(last).toMatchObject({ armed: 0, axis_enable_mask: 0, io_output_word: 0, jog_session_open: 0, active_mode: 0 });
      // moving when the stop arrived, at rest within the quick stop time (300 ms in the fixture) after it,
      // in record time (whole cycles of cycle_ns on the stepped clock)
      const kStop = recs.findIndex((r) => r.armed === 0);
      expect(kStop).toBeGreaterThanOrEqual(0);
      expect(Math.abs(recs[Math.max(0, kStop - 1)]!.ax[J1]!.velocity_actual_counts_per_s)).toBeGreaterThan(0);
      const still = recs.findIndex((r, k) => k >= kStop && r.ax[J1]!.velocity_actual_counts_per_s === 0);
      expect(still).toBeGreaterThanOrEqual(kStop);
      expect(between(recs[kStop]!, recs[still]!)).toBeLessThanOrEqual(300_000_000n);
      expect(Math.abs(last.ax[J1]!.velocity_actual_counts_per_s)).toBe(0);
      const ev = await eventsSince(st.client, cursor);
      expect(ofType(ev, 'jog_end').map((e) => jogOf(e).jog_generation)).toEqual([jg]);
      expect((await readStatus(st.client)).core!.io_output_word).toBe(0n);
    });
  });

  test('lease lost during a jog: motion stops and the jog ends', covers('rule:jog_session.end_closes'), async ({ cell, client, description, drive, op, target, skip }) => {
    await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
      needsMotion({ skip }, st.target);
      const cursor = await eventCursor(st.client);
      const acquired = performance.now();
      const s0 = await st.cell.grant({ requested_lease_ms: 300 });
      const all = (1 << st.axes.length) - 1;
      // Enable, arm and begin inside the unrenewed 300 ms lease: a refusal after the harness took longer
      // than the lease to get there is the host's (the lease ran out as documented).
      const jg = await hostBound(
        { rule: 'document 1 part 4: a grant is good for its lease', marginMs: 300, measured: () => ({ ms: performance.now() - acquired, what: 'from the acquire to the refusal' }) },
        async () => {
          await st.cell.fenced('enable', s0, { axis_mask: all });
          const arm = st.cell.fenced('arm', s0);
          await st.step(20);
          expect((await arm).status).toBe(200);
          return begin(st, s0, 1 << J1);
        },
      );
      await send(st, frame(st, s0, jg, 1n, velocities(st, J1, 0.2)));
      await st.step(framePeriod(st, 50));
      // no renewal: the lease (300 ms of host time) runs out while the producer keeps jogging, until the
      // core reports the grant gone (read from status, so the same iterations on every run and on a replay)
      let seq = 1n;
      const granted = async () => Number((((await readStatus(st.client)).core as unknown as { grant_observation: { GrantActive: unknown } }).grant_observation.GrantActive)) !== 0;
      for (let k = 0; k < 10_000 && (await granted()); k++) {
        await send(st, frame(st, s0, jg, ++seq, velocities(st, J1, 0.2)));
        await st.step(framePeriod(st, 10));
      }
      const t0 = await latestSequence(st.client);
      await st.step(400);
      const recs = await recordsSince(st.client, t0);
      expect(recs.at(-1)).toMatchObject({ grant_active: 0, armed: 0, axis_enable_mask: 0, jog_session_open: 0 });
      expect(recs.at(-1)!.ax[J1]!.velocity_actual_counts_per_s).toBe(0);
      const ev = await eventsSince(st.client, cursor);
      expect(ofType(ev, 'grant_expired')).toHaveLength(1);
      expect(ofType(ev, 'jog_end').map((e) => jogOf(e).jog_generation)).toEqual([jg]);
    });
  });
});

describe('legacy jog (test_only)', () => {
  test(
    'jog needs axis_mask, velocity and timeout_ms 1..250: 0 and 251 refused, 1 and 250 admitted',
    covers('rule:op.jog.required', 'limit:legacy_jog_timeout_ms', 'field:Request.velocity'),
    async ({ cell, client, description, drive, op, target, skip }) => {
      const legacy = description.capabilities.find((c) => c.name === 'jog')?.state;
      skip(legacy !== 'implemented' && legacy !== 'test_only', 'the legacy jog is not implemented on this target (Describe)');
      await withCell({ cell, client, description, drive, op, target, skip }, async (st) => {
        const s = await ready(st);
        const v = velocities(st, J1, 0.1);
        const ok = { axis_mask: 1 << J1, velocity: v, timeout_ms: 100 };
        for (const k of Object.keys(ok)) {
          const { [k]: _drop, ...rest } = ok as Record<string, unknown>;
          const r = await fenced(st, 'jog', s, rest);
          expect([r.status, r.label], k).toEqual([409, 'invalid_request_envelope']);
        }
        for (const t of [0, 251]) {
          const r = await fenced(st, 'jog', s, { ...ok, timeout_ms: t });
          expect([r.status, r.label], String(t)).toEqual([409, 'invalid_request_envelope']);
        }
        const short = await fenced(st, 'jog', s, { ...ok, velocity: v.slice(1) });
        expect([short.status, short.label]).toEqual([409, 'invalid_request_envelope']);
        let sent = 0n;
        for (const t of [1, 250]) {
          sent = hostNs();
          const r = await fenced(st, 'jog', s, { ...ok, timeout_ms: t });
          expect(r.status, `${t}: ${r.reply.error}`).toBe(200);
          expect(r.reply.sequence).toBeGreaterThan(0n);
        }
        // The legacy session is open until its input deadline, the last jog's timeout after it (250 ms, host
        // time): a real-time cell read later than that may rightly show it expired.
        await inTime(
          st,
          { rule: 'docs/profile.md "Jog" (legacy jog): input deadline now + timeout_ms', marginMs: 250, measured: () => ({ ms: Number(hostNs() - sent) / 1e6, what: 'from the last jog sent to the read' }) },
          async () => expect(await readJog(st.client)).toMatchObject({ Mode: 2n, SessionOpen: 1n }),
        );
        // an independent generation is never taken over by a legacy jog (and end_jog ends it: both while it
        // is open, before the begin's input deadline, 200 ms)
        const jg = await begin(st, s, 1 << J1);
        const opened = st.inputs.at(-1)!;
        await inTime(
          st,
          { rule: 'document 1 part 3 "Jog session": the generation open until its input deadline', marginMs: Number(opened.deadline - opened.sent) / 1e6, measured: () => ({ ms: Number(hostNs() - opened.sent) / 1e6, what: "from the begin's origin to the check" }) },
          async () => {
            const c = await fenced(st, 'jog', s, ok);
            expect([c.status, c.label]).toEqual([409, 'mode_conflict']);
            expect((await fenced(st, 'end_jog', s, { jog_generation: jg })).status).toBe(200);
          },
        );
      });
    },
  );
});
