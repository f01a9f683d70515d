// The evidence a conformance test leaves for the qualification report, gathered as the test runs
// (harness/evidence-setup.ts opens and closes it around each test; docs/architecture.md "Report"):
//
// - measurements with limits (harness/measure.ts), among them, for every test that commands motion
//   (start_trajectory, start_program, home, begin_jog, jog), each moving axis's maximum following error
//   and completion time from the telemetry of the test's window (harness/motion.ts), and its plot data;
// - contributions to the run's measurements, mergeable across tests, workers and shards: cycle lateness
//   (a log histogram of cycle_jitter_ns) and overruns, renew round trips, telemetry drops and gaps;
// - for a failed or errored test, its transcript: the requests it sent and the replies it got, the
//   events around the failure and the stack's stderr tail, with every session token the run was issued
//   replaced by `<session #n>`.
//
// Everything travels in the test's meta (`meta.evidence`), so it reaches run.json, vitest's blob reports
// (`hil merge`) and the report the same way on every target. Reading telemetry bypasses the observers
// (the harness's own reads are not the test's exchanges). An output sink never aborts a run: a read that
// fails leaves a note, never an error.

import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exchange } from './clients/exchange.ts';
import { exchangeObservers, type ControlClient, type Exchange } from './clients/control.ts';
import { parseExact, stringifyExact, type JsonExact } from './oracle/json.ts';
import { enterMeasuredTest, leaveMeasuredTest, measurementFailure, withinLimit, type Limit, type MeasurementRecord, type MeasurementSink } from './measure.ts';
import { analyseMotion, histAdd, newHist, PROFILE_COMPLETION_TOLERANCE, WindowBuilder, type AxisInfo, type AxisSeries, type LogHist } from './motion.ts';

/** Contributions of one test to the run's measurements (merged by harness/report/run-measurements.ts). */
export interface RunSamples {
  /** cycle_jitter_ns of every cycle read, base 1 us. */
  lateness?: LogHist;
  /** max_cycle_lateness_ns of the configuration, where known. */
  lateness_limit_ns?: number;
  /** Cycles later than lateness_limit_ns. */
  overruns?: number;
  /** Round trips of renew (the fenced operation every controller sends most), ms, base 1 us. */
  renew_ms?: LogHist;
  telemetry_dropped?: number;
  telemetry_gaps?: number;
  /** Wall time the harness spent collecting this test's evidence (cursors, windows, transcripts), ms. */
  evidence_ms?: number;
}

export interface TranscriptEntry {
  /** ms since the test began. */
  at_ms: number;
  method: string;
  path: string;
  request: string;
  status?: number;
  reply?: string;
  error?: string;
  ms: number;
}

export interface Transcript {
  exchanges: TranscriptEntry[];
  /** Exchanges left out (only the last ones are kept). */
  omitted: number;
  /** The last events the target had when the test failed (subscribe_events), as JSON text. */
  events?: string;
  /** The stack's stderr tail, per target. */
  stderr?: { target: string; text: string }[];
  notes?: string[];
}

/** What a test leaves in `meta.evidence`. */
export interface TestEvidence {
  measurements: MeasurementRecord[];
  plots?: AxisSeries[];
  samples?: RunSamples;
  transcript?: Transcript;
  notes?: string[];
}

declare module '@vitest/runner' {
  interface TaskMeta {
    evidence?: TestEvidence;
  }
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MOTION_OPS = new Set(['start_trajectory', 'start_program', 'home', 'begin_jog', 'jog']);
const WINDOW_CAP = 3000; // records: about 16 MB of batches at most per client and test
const KEEP_EXCHANGES = 80;
const KEEP_RECENT = 20;
const TEXT_MAX = 1500;
const EVENTS_TEXT_MAX = 12_000;
export const HOME_LIMIT: Limit = { kind: 'at_most', hi: 60_000, source: 'documented', ref: 'document 1 part 4 home: "waits up to 60 s"' };
export const GAPS_LIMIT: Limit = { kind: 'equals', lo: 0, source: 'documented', ref: 'document 1 part 4: a non-empty batch has contiguous sequences' };

interface Watched {
  client: ControlClient;
  cursor: bigint;
}

/** One test's collector. */
export class Collector implements MeasurementSink {
  readonly started = performance.now();
  readonly evidence: TestEvidence = { measurements: [] };
  private exchanges: HeldExchange[] = [];
  private omitted = 0;
  readonly watched: Watched[] = [];
  private pendingCursor = new Map<ControlClient, Promise<void>>();
  lastClient?: ControlClient;
  stderr: { target: string; text: string }[] = [];
  injector?: (fault: Record<string, unknown>) => Promise<void>;
  planted = false;
  disturbed = false;
  homeMs = 0;

  constructor(readonly name: string) {}

  add(m: MeasurementRecord): void {
    this.evidence.measurements.push(m);
  }

  note(s: string): void {
    (this.evidence.notes ??= []).push(s);
  }

  samples(): RunSamples {
    return (this.evidence.samples ??= {});
  }

  spent(ms: number): void {
    const s = this.samples();
    s.evidence_ms = Math.round(((s.evidence_ms ?? 0) + ms) * 100) / 100;
  }

  /** With a motion command: take the telemetry cursor of its client once (read beside the command). */
  beforeMotion(client: ControlClient): Promise<void> | undefined {
    if (this.watched.some((w) => w.client === client)) return undefined;
    let p = this.pendingCursor.get(client);
    if (!p) {
      const t0 = performance.now();
      p = newestSequence(client).then(
        (cursor) => void this.watched.push({ client, cursor }),
        (e) => this.note(`telemetry cursor not taken before the motion command: ${(e as Error).message}`),
      ).finally(() => this.spent(performance.now() - t0));
      this.pendingCursor.set(client, p);
    }
    return p;
  }

  /** Every telemetry cursor asked for has been taken (or noted as not taken). */
  async cursorsTaken(): Promise<void> {
    await Promise.all(this.pendingCursor.values());
  }

  exchange(x: Exchange, op: string | undefined): void {
    this.lastClient = x.client;
    // Kept as the bytes a transcript would show, cut to TEXT_MAX + 1 (copied: the caller's buffers may be
    // reused or large); decoded and redacted only when a transcript is taken (a failed test), which is rare,
    // while every exchange of every test passes here.
    const held: HeldExchange = { at_ms: Math.round(x.at - this.started), method: x.method, path: x.path, request: headOf(x.body), ms: Math.round(x.ms * 100) / 100 };
    if (x.reply) {
      held.status = x.reply.status;
      const ct = String(x.reply.headers['content-type'] ?? '');
      held.reply = ct.includes('json') || ct.startsWith('text/') ? new Uint8Array(x.reply.body.subarray(0, TEXT_MAX + 1)) : `(${x.reply.body.length} bytes of ${ct || 'unknown type'})`;
    } else held.error = String((x.error as Error)?.message ?? x.error);
    this.exchanges.push(held);
    if (this.exchanges.length > KEEP_EXCHANGES) {
      // Commands are what a reader needs; polls (status, events, telemetry) repeat: the oldest poll goes first.
      const poll = this.exchanges.findIndex((e, i) => e.method === 'GET' && i < this.exchanges.length - KEEP_RECENT);
      this.exchanges.splice(poll >= 0 ? poll : 0, 1);
      this.omitted++;
    }
    if (x.reply?.status === 200 && op === 'renew') histAdd((this.samples().renew_ms ??= newHist(0.001)), x.ms);
    if (x.reply?.status === 200 && op === 'home') this.homeMs = Math.max(this.homeMs, x.ms);
  }

  transcript(): Transcript {
    return { exchanges: this.exchanges.map(entryOf), omitted: this.omitted, ...(this.stderr.length ? { stderr: this.stderr.map((s) => ({ target: s.target, text: redact(s.text) })) } : {}) };
  }
}

/** An exchange as a collector holds it: the leading bytes of the request and reply, not yet text. */
interface HeldExchange {
  at_ms: number;
  method: string;
  path: string;
  request: string | Uint8Array;
  status?: number;
  /** The reply's leading bytes (JSON or text), or what stands for a reply of another type. */
  reply?: Uint8Array | string;
  error?: string;
  ms: number;
}

/** The transcript entry of a held exchange: text cut to TEXT_MAX, every session token seen so far redacted. */
function entryOf(h: HeldExchange): TranscriptEntry {
  const e: TranscriptEntry = { at_ms: h.at_ms, method: h.method, path: h.path, request: redact(clip(typeof h.request === 'string' ? h.request : Buffer.from(h.request).toString('utf8'))), ms: h.ms };
  if (h.status !== undefined) {
    e.status = h.status;
    e.reply = typeof h.reply === 'string' ? h.reply : redact(clip(Buffer.from(h.reply!).toString('utf8')));
  }
  if (h.error !== undefined) e.error = redact(h.error);
  return e;
}

/** The first TEXT_MAX + 1 characters (bytes, copied) of a request body, as bodyText reads them. */
function headOf(body: string | Uint8Array | undefined): string | Uint8Array {
  if (body === undefined) return '';
  return typeof body === 'string' ? body.slice(0, TEXT_MAX + 1) : new Uint8Array(body.subarray(0, TEXT_MAX + 1));
}

// ---------------------------------------------------------------------------------------------
// The tests running in this worker, and the observers of every ControlClient

const running = new Set<Collector>();
/** Every session token this worker has seen issued (document 1 part 2: 64 lowercase hex), numbered in order. */
const tokens = new Map<string, number>();
const TOKEN_LOG = process.env.HIL_TOKEN_LOG;

export function running1(): Collector | undefined {
  return running.size === 1 ? [...running][0] : undefined;
}

export function beginTest(name: string): Collector {
  installObservers();
  const c = new Collector(name);
  const inject = injectors.get(name);
  if (inject) c.injector = inject;
  running.add(c);
  enterMeasuredTest(c);
  return c;
}

export function leaveTest(c: Collector): void {
  running.delete(c);
  injectors.delete(c.name);
  leaveMeasuredTest(c);
}

/** The stderr a target wrote, for the transcript of the tests running (harness/fixture.ts when a test fails). */
export function noteStderr(target: string, text: string): void {
  const tail = text.length > 4000 ? `...${text.slice(-4000)}` : text;
  for (const c of running) c.stderr.push({ target, text: tail });
}

/**
 * The running tests disturbed the core through the target's private test channel (an injected fault, a
 * stall, a core restart): their windows' cycle lateness is the injection's, not the core's, and is not counted.
 */
export function noteTestChannel(path: string): void {
  // A step or a look at the service's waits on the core disturbs nothing.
  if (path === '/step' || path === '/core-waits') return;
  for (const c of running) c.disturbed = true;
}

/**
 * The test of this name may plant a fault through this target's test channel (HIL_PLANT; harness/fixture.ts).
 * Fixtures a hook uses start before the hook itself runs, so the test may not have begun yet.
 */
const injectors = new Map<string, (fault: Record<string, unknown>) => Promise<void>>();
export function offerInjector(test: string, inject: (fault: Record<string, unknown>) => Promise<void>): void {
  injectors.set(test, inject);
  for (const c of running) if (c.name === test) c.injector ??= inject;
}

/** Replace every session token seen in this worker by `<session #n>`. */
export function redact(text: string): string {
  if (tokens.size === 0) return text;
  return text.replace(/[0-9a-f]{64}/g, (m) => (tokens.has(m) ? `<session #${tokens.get(m)}>` : m));
}

function learnTokens(reply: Uint8Array): void {
  // Most replies carry no session: the byte search (no copy, no decoding) settles those; every match of the
  // pattern below contains the key.
  const head = Buffer.from(reply.buffer, reply.byteOffset, Math.min(reply.length, 4096));
  if (head.indexOf('"session"') < 0) return;
  const text = head.toString('utf8');
  for (const m of text.matchAll(/"session"\s*:\s*"([0-9a-f]{64})"/g)) {
    const t = m[1]!;
    if (tokens.has(t)) continue;
    tokens.set(t, tokens.size + 1);
    if (TOKEN_LOG) {
      try {
        appendFileSync(TOKEN_LOG, `${t}\n`);
      } catch {
        // a sink never aborts a run
      }
    }
  }
}

let installed = false;
function installObservers(): void {
  if (installed) return;
  installed = true;
  exchangeObservers.before = (client, _method, path, body) => {
    if (running.size === 0 || path !== '/v1/control') return;
    const op = operationOf(body);
    if (!op || !MOTION_OPS.has(op)) return;
    // The cursor is read beside the command, never ahead of it: a request held back for evidence arrives
    // late (a begin_jog whose deadline is 50 ms away, a Start racing a stepped-clock step), and the
    // evidence would then change what it records. The window may miss the command's first cycles.
    for (const c of running) c.beforeMotion(client);
    // A planted fault goes in before the command that moves, so the whole motion runs with it (injected
    // after the reply, the fault reached a short trajectory too late on a loaded machine: the test passed).
    const plants = op === 'home' ? [] : [...running].map((c) => maybePlant(c, body)).filter((p): p is Promise<void> => p !== undefined);
    return plants.length ? Promise.all(plants).then(() => undefined) : undefined;
  };
  exchangeObservers.after = (x) => {
    if (x.reply) learnTokens(x.reply.body);
    if (running.size === 0) return;
    const op = x.path === '/v1/control' || x.path.startsWith('/v1/program') ? operationOf(x.body) : undefined;
    for (const c of running) {
      c.exchange(x, op);
    }
  };
}

function operationOf(body: string | Uint8Array | undefined): string | undefined {
  if (body === undefined) return undefined;
  const head = typeof body === 'string' ? body.slice(0, 16384) : Buffer.from(body.subarray(0, 16384)).toString('latin1');
  return /"operation"\s*:\s*"([a-z_]+)"/.exec(head)?.[1];
}

function bodyText(body: string | Uint8Array | undefined): string {
  if (body === undefined) return '';
  return typeof body === 'string' ? body.slice(0, TEXT_MAX + 1) : Buffer.from(body.subarray(0, TEXT_MAX + 1)).toString('utf8');
}

function clip(s: string): string {
  return s.length > TEXT_MAX ? `${s.slice(0, TEXT_MAX)}... (cut)` : s;
}

// ---------------------------------------------------------------------------------------------
// A planted failure (HIL_PLANT=<fault kind>@<part of a test's full name>): the fault is injected through
// the target's private test channel just before the test's first motion command other than Home is sent
// (the command waits for it), on the command's lowest axis. Used to show, on a real run, what a failed
// motion test looks like in the report. Only the planted test's command is delayed.

function maybePlant(c: Collector, body: string | Uint8Array | undefined): Promise<void> | undefined {
  const plant = process.env.HIL_PLANT;
  if (!plant || c.planted || !c.injector) return undefined;
  // A planted harness fault is thrown by the fixture (harness/fixture.ts), not injected into the target.
  if (plant.startsWith('harness_fault@')) return undefined;
  const at = plant.indexOf('@');
  if (at <= 0 || !c.name.includes(plant.slice(at + 1))) return undefined;
  c.planted = true;
  const mask = Number(/"axis_mask"\s*:\s*(\d+)/.exec(bodyText(body))?.[1] ?? 1) || 1;
  const axis = 31 - Math.clz32(mask & -mask);
  const inject = c.injector;
  c.note(`planted: ${plant.slice(0, at)} on axis ${axis} (HIL_PLANT)`);
  return inject({ kind: plant.slice(0, at), axis }).catch((e) => c.note(`plant failed: ${(e as Error).message}`));
}

// ---------------------------------------------------------------------------------------------
// After the test: telemetry windows, motion measurements, run samples

/** The machine configuration the target runs, where the harness has it (sim, replay and rig targets). */
interface MachineLimits {
  latenessNs?: number;
  axes: { name: string; following_error?: number; following_error_timeout_ms?: number; completion_tolerance?: number; completion_timeout_ms?: number }[];
}

let machineCache: { file: string; limits: MachineLimits | undefined } | undefined;
function machineLimits(): MachineLimits | undefined {
  const target = process.env.HIL_TARGET ?? 'sim';
  if (target === 'external') return undefined;
  const file = process.env.HIL_MACHINE ?? join(ROOT, 'fixtures', 'machines', 'nine-axis.json');
  if (machineCache?.file === file) return machineCache.limits;
  let limits: MachineLimits | undefined;
  try {
    const m = JSON.parse(readFileSync(file, 'utf8')) as { max_cycle_lateness_ns?: number; axes?: { name?: string; robot_joint?: string; limits?: Record<string, number> }[] };
    limits = {
      ...(typeof m.max_cycle_lateness_ns === 'number' ? { latenessNs: m.max_cycle_lateness_ns } : {}),
      axes: (m.axes ?? []).map((a) => ({
        name: String(a.name ?? a.robot_joint ?? ''),
        ...(typeof a.limits?.following_error === 'number' ? { following_error: a.limits.following_error } : {}),
        ...(typeof a.limits?.following_error_timeout_ms === 'number' ? { following_error_timeout_ms: a.limits.following_error_timeout_ms } : {}),
        ...(typeof a.limits?.completion_tolerance === 'number' ? { completion_tolerance: a.limits.completion_tolerance } : {}),
        ...(typeof a.limits?.completion_timeout_ms === 'number' ? { completion_timeout_ms: a.limits.completion_timeout_ms } : {}),
      })),
    };
  } catch {
    limits = undefined;
  }
  machineCache = { file, limits };
  return limits;
}

const describeCache = new WeakMap<ControlClient, Promise<Record<string, unknown> | undefined>>();

/**
 * End of the test: read each watched client's telemetry window, measure the motion and the run samples,
 * write the evidence into the meta. Throws HIL_ERR_MEASUREMENT_LIMIT when a measurement is outside its limit.
 */
export async function finishTest(c: Collector, meta: { evidence?: TestEvidence }): Promise<void> {
  const t0 = performance.now();
  const fails: MeasurementRecord[] = [];
  const record = (m: Omit<MeasurementRecord, 'outcome'>): void => {
    const outcome = m.limit ? (withinLimit(m.value, m.limit) ? 'pass' : 'fail') : 'unlimited';
    const rec: MeasurementRecord = { ...m, outcome };
    c.add(rec);
    if (outcome === 'fail') fails.push(rec);
  };
  if (c.homeMs > 0) record({ name: 'home_duration', unit: 'ms', value: Math.round(c.homeMs), limit: HOME_LIMIT });
  await c.cursorsTaken();
  const machine = machineLimits();
  for (const w of c.watched) {
    try {
      await measureWindow(c, w, machine, record);
    } catch (e) {
      c.note(`telemetry window not measured: ${(e as Error).message}`);
    }
  }
  if (c.watched.length) c.spent(performance.now() - t0);
  const e = c.evidence;
  if (e.measurements.length || e.plots?.length || e.samples || e.notes?.length) meta.evidence = e;
  if (fails.length) throw measurementFailure(fails);
}

async function measureWindow(c: Collector, w: Watched, machine: MachineLimits | undefined, record: (m: Omit<MeasurementRecord, 'outcome'>) => void): Promise<void> {
  const tw = performance.now();
  const b = new WindowBuilder(WINDOW_CAP);
  for (let cursor = w.cursor; !b.full; ) {
    const r = await get(w.client, `/v1/telemetry?after=${cursor}`);
    if (r.status !== 200) throw new Error(`telemetry poll after=${cursor} answered ${r.status}`);
    const { last, count } = b.add(r.body);
    cursor = last;
    if (count < 4096) break;
  }
  const win = b.build();
  if (process.env.HIL_EVIDENCE_DEBUG) process.stderr.write(`window from ${w.cursor}: ${win.count} records in ${Math.round(performance.now() - tw)} ms\n`);
  const s = c.samples();
  if (win.coreTime) c.note('the core ran on its own clock (stepped or fast) in this window: its cycle lateness is not counted');
  else if (c.disturbed) c.note('the test disturbed the core through the test channel: its cycle lateness is not counted');
  else {
    const late = (s.lateness ??= newHist(1000));
    let overruns = 0;
    for (let i = 0; i < win.count; i++) {
      histAdd(late, win.jitter[i]!);
      if (machine?.latenessNs !== undefined && win.jitter[i]! > machine.latenessNs) overruns++;
    }
    if (machine?.latenessNs !== undefined) {
      s.lateness_limit_ns = machine.latenessNs;
      s.overruns = (s.overruns ?? 0) + overruns;
    }
  }
  s.telemetry_dropped = (s.telemetry_dropped ?? 0) + win.dropped;
  s.telemetry_gaps = (s.telemetry_gaps ?? 0) + win.gaps;
  record({ name: 'telemetry_gaps', unit: 'records', value: win.gaps, limit: GAPS_LIMIT });
  if (win.truncated) c.note(`telemetry window longer than ${WINDOW_CAP} records: measured over its first ${win.count}`);

  let d = describeCache.get(w.client);
  if (!d) {
    d = get(w.client, '/v1/describe').then((r) => (r.status === 200 ? ((parseExact(r.body) as { data?: Record<string, unknown> }).data ?? undefined) : undefined));
    describeCache.set(w.client, d);
  }
  const desc = await d;
  const axes = Array.isArray(desc?.axes) ? (desc.axes as Record<string, unknown>[]) : [];
  // The configuration's limits apply when its axes are the ones Describe reports, in the same order.
  const config = machine && machine.axes.length === axes.length && machine.axes.every((a, i) => a.name === String(axes[i]!.id)) ? machine : undefined;
  const infos: AxisInfo[] = axes.map((a, i) => {
    const cfg = config?.axes[i];
    return {
      id: String(a.id),
      unit: String(a.position_unit ?? 'unit'),
      countsPerUnit: Number(a.counts_per_unit) * (Number(a.sign) < 0 ? -1 : 1),
      ...(cfg?.following_error !== undefined ? { followingError: cfg.following_error } : {}),
      ...(cfg?.following_error_timeout_ms !== undefined ? { followingErrorTimeoutMs: cfg.following_error_timeout_ms } : {}),
      ...(cfg?.completion_tolerance !== undefined ? { completionTolerance: cfg.completion_tolerance } : {}),
      ...(cfg?.completion_timeout_ms !== undefined ? { completionTimeoutMs: cfg.completion_timeout_ms } : {}),
      configPath: `axes[${i}]`,
    };
  });
  const plots = (c.evidence.plots ??= []);
  for (const m of analyseMotion(win, infos)) {
    const ax = m.axis;
    record({
      name: 'following_error_max',
      unit: ax.unit,
      axis: ax.id,
      value: m.feMax,
      ...(ax.followingError !== undefined ? { limit: { kind: 'at_most', hi: ax.followingError, source: 'configured', ref: `${ax.configPath}.limits.following_error` } as Limit } : {}),
      ...(ax.followingErrorTimeoutMs !== undefined ? { note: `held for ${ax.followingErrorTimeoutMs} ms (limits.following_error_timeout_ms)` } : {}),
    });
    record({ name: 'following_error_peak', unit: ax.unit, axis: ax.id, value: m.fePeak });
    if (m.completionMs !== undefined) {
      record({
        name: 'completion_time',
        unit: 'ms',
        axis: ax.id,
        value: Math.round(m.completionMs * 1000) / 1000,
        ...(ax.completionTimeoutMs !== undefined ? { limit: { kind: 'at_most', hi: ax.completionTimeoutMs, source: 'configured', ref: `${ax.configPath}.limits.completion_timeout_ms` } as Limit } : {}),
        ...(m.toleranceConfigured ? {} : { note: `tolerance ${PROFILE_COMPLETION_TOLERANCE} ${ax.unit} (profile: no machine configuration)` }),
      });
    } else c.note(`${ax.id}: position not within ${m.tolerance} ${ax.unit} of its final target by the end of the window; no completion time`);
    plots.push(m.series);
  }
}

/**
 * A GET on the client's connection that the observers do not see (the harness's own reads). A telemetry
 * poll that meets a capture write in progress is answered 409 telemetry_busy (document 1 part 7): tried
 * again, a few ms later, for up to about a second.
 */
async function get(client: ControlClient, path: string): Promise<{ status: number; body: Uint8Array }> {
  for (let attempt = 0; ; attempt++) {
    const res = await exchange(client.agent, `${client.origin}${path}`, { method: 'GET' });
    const r = { status: res.status, body: res.body };
    if (r.status !== 409 || attempt >= 50 || !Buffer.from(r.body.subarray(0, 512)).toString('latin1').includes('telemetry_busy')) return r;
    await new Promise((ok) => setTimeout(ok, 20));
  }
}

/** The newest telemetry sequence (document 1 part 4 cursor rules), walking from Status core.cycle as a hint (harness/clients/telemetry.ts latestSequence). */
async function newestSequence(client: ControlClient): Promise<bigint> {
  let after = 0n;
  const st = await get(client, '/v1/status');
  if (st.status === 200) {
    const cycle = (parseExact(st.body) as { data?: { core?: { cycle?: unknown } } }).data?.core?.cycle;
    if (typeof cycle === 'bigint' && cycle > 64n) after = cycle - 64n;
  }
  for (let polls = 1; ; polls++) {
    const r = await get(client, `/v1/telemetry?after=${after}`);
    if (process.env.HIL_EVIDENCE_DEBUG) process.stderr.write(`cursor poll ${polls} after=${after}: ${r.status} ${r.body.length} bytes\n`);
    if (r.status === 409 && after !== 0n) {
      after = 0n;
      continue;
    }
    if (r.status !== 200) throw new Error(`telemetry poll after=${after} answered ${r.status}`);
    const b = new WindowBuilder(0);
    const { last, count } = b.add(r.body);
    if (count < 4096) return last;
    after = last;
  }
}

/**
 * The last events the target had (subscribe_events), one JSON line each: the last 25 other than
 * grant_renewed, which a controller's keepalive raises ten times a second and would crowd out the rest.
 */
async function eventsAround(client: ControlClient): Promise<string> {
  const poll = async (after: bigint) => {
    const r = await get(client, `/v1/events?after=${after}`);
    if (r.status !== 200) throw new Error(`subscribe_events after=${after} answered ${r.status}`);
    return (parseExact(r.body) as { data: { events: Record<string, unknown>[]; next_sequence: bigint; latest_sequence: bigint } }).data;
  };
  const latest = (await poll(0n)).latest_sequence;
  const kept: Record<string, unknown>[] = [];
  let renewals = 0;
  for (let after = latest > 300n ? latest - 300n : 0n; after < latest; ) {
    const d = await poll(after);
    if (d.events.length === 0) break;
    for (const e of d.events) {
      if (e.type === 'grant_renewed') renewals++;
      else kept.push(e);
    }
    after = d.next_sequence;
  }
  const lines = kept.slice(-25).map((e) => stringifyExact(e as JsonExact));
  if (renewals) lines.push(`(${renewals} grant_renewed events of the last ${latest > 300n ? 300 : Number(latest)} left out)`);
  return redact(lines.join('\n')).slice(0, EVENTS_TEXT_MAX);
}

// ---------------------------------------------------------------------------------------------
// When a test fails: its transcript, the events around the failure, and the redaction of its errors

export async function failedTest(c: Collector, meta: { evidence?: TestEvidence }, errors: { message?: string; stack?: string }[] | undefined): Promise<void> {
  const t = c.transcript();
  if (c.lastClient) {
    try {
      t.events = await eventsAround(c.lastClient);
    } catch (e) {
      (t.notes ??= []).push(`events not read: ${(e as Error).message}`);
    }
  }
  meta.evidence = { ...c.evidence, transcript: t };
  // Assertion messages may quote a token (expected '<token>' to be ...): every reporter reads these.
  for (const e of errors ?? []) {
    if (typeof e.message === 'string') e.message = redact(e.message);
    if (typeof e.stack === 'string') e.stack = redact(e.stack);
    for (const k of ['expected', 'actual', 'diff'] as const) {
      const v = (e as Record<string, unknown>)[k];
      if (typeof v === 'string') (e as Record<string, unknown>)[k] = redact(v);
    }
  }
}
