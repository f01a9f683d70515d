// The vitest fixtures every conformance suite uses. Suites get the target from here and never assume
// which one it is; they ask `target.abilities` and Describe, and skip with a stated reason.

import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as allure from 'allure-js-commons';
import { afterAll, afterEach, beforeAll, beforeEach, expect as vitestExpect, onTestFinished, test as base, type TestContext } from 'vitest';
import { HarnessError, verdictOfError } from './errors.ts';
import { Cell, type Session } from './clients/cell.ts';
import { driverOf, type CellDriver } from './clients/stepped.ts';
import type { CheckedReply } from './oracle/reply.ts';
import { epochNow, keptLoss, startKeeper } from './clients/keeper.ts';
import { waitStatus } from './clients/status.ts';
import { hostMayStallBus, simulatesBusHere } from './clients/bus-stalls.ts';
import { hostBusStall } from './clients/host-stall.ts';
import { liveTargets } from './targets/live.ts';
import type { ControlClient } from './clients/control.ts';
import { stringifyExact } from './oracle/json.ts';
import { isShared, openTarget, perTestStacks, perTestStacksFixture, targetFromEnv, variantsFromEnv, type Target, type VariantOptions } from './targets/index.ts';
import { enterTest, leaveTest } from './targets/pertest.ts';
import { forgetDescription, rememberDescription } from './targets/described.ts';
import { withBinding } from './targets/binding.ts';
import { cannotStartRemote, startRemoteStack, type RemoteOptions, type RemoteStack } from './targets/remote.ts';
import { noteStderr, offerInjector, redact } from './evidence.ts';
import { takeProfileDifferences } from './trace.ts';
import { lateness, timeoutByHost } from './lateness.ts';
import { longTierOn } from './long-tier.ts';
export { LONG_TAG } from './long-tier.ts';

export { expect, describe } from 'vitest';
export { covers, inProfile, profile } from './trace.ts';
export { measure } from './measure.ts';
export { hostBound } from './lateness.ts';
export { perTestStacks } from './targets/index.ts';

/**
 * Run a set-up step (a beforeAll or beforeEach hook) that holds a grant: when it fails after a held grant
 * was lost to the host's lateness (harness/clients/keeper.ts keptLoss), the failure is the harness's,
 * HIL_ERR_HOST_TOO_SLOW (ERROR for every test of the block), with the figures; otherwise it stands.
 */
export async function hostJudged<T>(fn: () => Promise<T>): Promise<T> {
  const from = epochNow();
  try {
    return await fn();
  } catch (e) {
    if (verdictOfError(e) !== 'fail') throw e;
    const loss = await keptLoss(from);
    if (!loss || loss.target) throw e;
    const first = String((e as Error)?.message ?? e).split('\n')[0];
    throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `${loss.text}; the check that failed: ${first}`, { cause: e });
  }
}

export interface Description {
  [k: string]: unknown;
  binding: { pair_id: string; revision: bigint; configuration_sha256: string; machine_sha256?: string };
  capabilities: Array<{ name: string; state: string; transport: string }>;
  axes: Array<Record<string, unknown> & { id: string }>;
}

// The grant keeper's thread comes up while the file's target starts, before the first held grant needs it;
// the event-loop sampler runs from the worker's first file on (harness/lateness.ts).
startKeeper();
lateness.start();

const RUN_DIR = process.env.HIL_RUN_DIR ?? join(process.cwd(), 'reports', '.run');

/** The file's targets this worker has opened (a shared target is settled after every test that may have used it). */
const openTargets = new Set<Target>();
/** The file's target while any of its test APIs' file fixtures holds it (the target fixture). */
const fileTargets = new Map<string, { target: Promise<Target>; users: number }>();

/** The test files that declared cycleFree() (absolute paths: a worker runs many files in one module graph). */
const cycleFreeFiles = new Set<string>();
const currentFile = (): string => vitestExpect.getState().testPath ?? '';

/**
 * Declares, at the top of a test file, that no test of the file needs the file's cell to cycle on its own:
 * they read Describe, Status and configuration, send requests the service or the core answers at once,
 * and never arm, home, jog, run a motion, wait for a lease or any other deadline of the cell's time, or
 * read telemetry or cycle timing. A target that can run the file's stack on a stepped clock then does
 * (the sim target: `hil serve --clock stepped`, no cycle runs unless the test channel asks, so the stack
 * costs no CPU while the file waits); every other target ignores it. Variants and stacks a test starts
 * itself keep the clocks they ask for. A file that declares it wrongly fails on the sim target (a stepped
 * cell never moves, never expires a lease), it cannot pass by it.
 */
export function cycleFree(): void {
  const file = currentFile();
  if (!file) throw new HarnessError('HIL_ERR_TARGET_OPTION', 'cycleFree() is called at the top of a test file, while vitest collects it');
  cycleFreeFiles.add(file);
}

/**
 * Declares, at the top of a test file, that its tests move the file's cell only through a CellDriver
 * (harness/clients/stepped.ts driverOf), stepping it where it runs on the stepped clock and waiting where
 * it runs in real time. A target that can run the file's stack on a stepped clock then does (as for
 * cycleFree), so what the tests see of a motion does not depend on how loaded the host is; every other
 * target ignores it and the same tests run against its real-time cell.
 */
export function stepsItsCell(): void {
  cycleFree();
}

/**
 * A separately started system with the given options (harness/targets/variant.ts), closed at the end of
 * the test. On a target that cannot provide it the test skips with the target's reason; malformed options
 * are an error on every target.
 */
export type VariantOf = (options: VariantOptions) => Promise<Target>;

/**
 * A fenced operation of the test's cell and its reply (the `op` fixture): on a stepped cell the clock is
 * stepped 5 cycles at a time until the reply comes (the core answers in a cycle), on a real-time one the
 * reply is awaited.
 */
export type Op = (operation: string, s: Pick<Session, 'session' | 'generation'>, fields?: Record<string, unknown>) => Promise<CheckedReply>;

/** The fixtures a test that moves the file's cell through its CellDriver (stepsItsCell) hands to its helpers. */
export interface CellFixtures {
  cell: Cell;
  client: ControlClient;
  description: Description;
  drive: CellDriver;
  op: Op;
  target: Target;
  skip: TestContext['skip'];
}

export const test = base.extend<{
  $file: { target: Target; description: Description };
  $test: { perTest: void; sharedSettled: void; client: ControlClient; cell: Cell; drive: CellDriver; op: Op; variant: VariantOf; traced: void };
}>({
  // First of all (fixtures are set up in this order and torn down in reverse): the target's per-test stacks,
  // where its run has them (its descriptor's recorder: harness/targets/index.ts perTestStacksFixture);
  // nothing happens on a plain run.
  perTest: [perTestStacksFixture, { auto: true }],
  // A shared target (external, rig: one service, one grant for the whole run) is brought back to idle after
  // every test, whichever fixture or client the test reached it through (harness/targets/shared.ts); the
  // run gives it one test at a time (vitest.config.ts). Set up before the test's other fixtures, so this
  // runs after the cell fixture's own cleanup.
  sharedSettled: [
    async ({}, use) => {
      await use();
      if (!isShared(targetFromEnv().name)) return;
      for (const t of openTargets) await t.settle?.();
    },
    { auto: true },
  ],
  target: [
    async ({}, use) => {
      // One target a file, whichever test API its tests use: vitest sets a file-scoped fixture up once for
      // each (test, recoveringTest), and two targets were two stacks, a recorded test's recording made on
      // one while its requests went to the other (its replay then never saw them).
      const file = currentFile();
      let entry = fileTargets.get(file);
      if (!entry) {
        entry = { target: openTarget(process.env, cycleFreeFiles.has(file) ? { fileClock: 'stepped' } : {}), users: 0 };
        fileTargets.set(file, entry);
      }
      const shared = entry;
      shared.users++;
      let target: Target;
      try {
        target = await shared.target;
      } catch (e) {
        if (--shared.users === 0) fileTargets.delete(file);
        throw e;
      }
      openTargets.add(target);
      try {
        await use(target);
      } finally {
        if (--shared.users === 0) {
          fileTargets.delete(file);
          openTargets.delete(target);
          await target.close();
        }
      }
    },
    { scope: 'file' },
  ],
  description: [
    async ({ target }, use) => {
      const c = target.client();
      const d = await describeOf(c);
      // A stack just started publishes its first status after its first cycle, which on a cell of a long
      // cycle (10 ms) can come after a test's first status read; a real-time cell is given that cycle
      // before its first test (bounded: a target whose core never publishes meets its tests as it is). A
      // stepped cell publishes only when stepped, which its tests do.
      if (d.clock !== 'stepped') await waitStatus(c, (x) => x.core !== null, 2_000).catch(() => undefined);
      recordTarget(target, d);
      rememberDescription(target, d);
      try {
        await use(d);
      } finally {
        forgetDescription(target);
      }
    },
    { scope: 'file' },
  ],
  client: async ({ target }, use) => {
    await use(target.client());
  },
  cell: async ({ target, description, onTestFailed, task }, use) => {
    onTestFailed(() => reportDiagnostics([target]));
    // A planted failure (HIL_PLANT, harness/evidence.ts) goes through the target's test channel.
    if (process.env.HIL_PLANT && target.abilities.faultInjection) offerInjector(task.fullName, (f) => target.inject(f));
    const client = target.client();
    const cell = new Cell(client, description.binding, await sharesClock(target), driverOf(target, client, description));
    // A grant of this cell that was not kept (judged from the clock it shares with the target) and lost to
    // the host's lateness makes what failed after it ERROR; held grants are judged for every test (traced).
    onTestFailed(async ({ task: t }) => {
      const loss = cell.grantLoss();
      if (loss && !loss.target) t.meta.hostTooSlow ??= loss.text;
      else if (loss) process.stderr.write(`${t.fullName}: ${loss.text}\n`);
    });
    try {
      await use(cell);
    } finally {
      // Every test leaves the cell stopped and released (DESIGN.md rule 5); a rig also checks it from status.
      // A failed test may have left what it injected (a fault condition the sim keeps until cleared) and
      // the faults latched from it: both are cleared, so the file's next test meets a clean cell. Not on a
      // shared target (a rig, someone's service): a fault latched on a real machine is for a person to
      // look at before anything resets it.
      const failed = task.result?.state === 'fail' && !isShared(target.name);
      if (failed) await clearInjected(target);
      await cell.cleanup({ resetFaults: failed });
      await target.settle?.();
    }
  },
  // How the test moves the file's cell on (harness/clients/stepped.ts driverOf): stepped where the file's
  // stack runs on the stepped clock (stepsItsCell), waited for in real time everywhere else.
  drive: async ({ target, client, description }, use) => {
    await use(driverOf(target, client, description));
  },
  op: async ({ cell, drive }: { cell: Cell; drive: CellDriver }, use: (op: Op) => Promise<void>) => {
    await use(opOf(cell, drive));
  },
  // Independent of the file's `target`, so a file of variant tests starts no stack it does not use.
  variant: async ({ skip, onTestFailed }, use) => {
    const opened: Target[] = [];
    onTestFailed(() => reportDiagnostics(opened));
    try {
      await use((options) => openVariantOrSkip(variantsFromEnv(), options, skip, opened));
    } finally {
      for (const v of opened.reverse()) await v.close();
    }
  },
  traced: [
    async ({ task, onTestFinished, onTestFailed }, use) => {
      const meta = task.meta;
      for (const id of meta.covers ?? []) await allure.label('covers', id);
      if (meta.kind) await allure.label('kind', meta.kind);
      await allure.label('target', process.env.HIL_TARGET ?? 'sim');
      plantHarnessFault(task.fullName);
      takeProfileDifferences();
      lateness.start();
      const started = performance.now();
      // A held grant lost to the host's lateness makes what failed after it ERROR, whichever cell of the
      // test held it (the fixture's, a variant's, a stepped stack's: harness/clients/keeper.ts keptLoss);
      // one the target expired although renewed in time is named beside the failure, which stands.
      const startedEpoch = epochNow();
      const startedNs = process.hrtime.bigint();
      onTestFailed(async ({ task: t }) => {
        const loss = await keptLoss(startedEpoch);
        if (loss && !loss.target) t.meta.hostTooSlow = loss.text;
        else if (loss) process.stderr.write(`${t.fullName}: ${loss.text}\n`);
        // A rig whose bench box opened the E-stop chain under the test: the harness's heartbeat lapsed, or
        // the box failed; either way not the cell (harness/targets/rig.ts benchLoss).
        for (const target of liveTargets()) {
          const bench = target.benchLoss?.(started);
          if (bench?.hostTooSlow !== undefined) t.meta.hostTooSlow ??= bench.hostTooSlow;
          else if (bench?.equipment !== undefined && t.meta.hostTooSlow === undefined) t.meta.equipmentLoss = bench.equipment;
        }
        // A cell faulted by its simulated bus or core stalling on this host, whichever open stack the test
        // used (the file's, a variant, a file's shared variant: harness/clients/bus-stalls.ts).
        for (const target of liveTargets()) {
          if (t.meta.hostTooSlow !== undefined) break;
          const stall = await busStallOf(target, startedNs);
          if (stall) t.meta.hostTooSlow = stall;
        }
        // A test run out of its time while the host kept the harness (or the target's process here) from
        // running for a tenth of it (harness/lateness.ts timeoutByHost).
        if (t.meta.hostTooSlow === undefined) {
          const slow = await timeoutByHost(t.result?.errors, started, performance.now());
          if (slow) t.meta.hostTooSlow = slow;
        }
      });
      // The harness's own lateness while the test ran, for run.json and the report's environment (noted when
      // the test finishes: meta set in a fixture's teardown does not always reach the reporter).
      // The profile differences likewise: the teardown below takes them, and whichever of the two runs last
      // puts them on the task the reporter reads (the captured meta of a worker's first file never reached it).
      let noted: ReturnType<typeof takeProfileDifferences> = [];
      onTestFinished(({ task: t }) => {
        const w = lateness.window(started, performance.now());
        if (w.samples) t.meta.lateness = { p99_ms: w.p99_ms, max_ms: w.max_ms };
        noted = [...noted, ...takeProfileDifferences()];
        if (noted.length > 0) t.meta.profileDifferences = noted;
      });
      try {
        await use();
      } finally {
        const d = takeProfileDifferences();
        if (d.length > 0) {
          noted = [...noted, ...d];
          meta.profileDifferences = noted;
          for (const x of d) await allure.label('profile_difference', x.profile);
        }
      }
    },
    { auto: true },
  ],
});

/**
 * Whether a failed test's cell was faulted by its simulated bus stalling on this host: only for a stack that
 * shares the harness's clock (the reference stack on this host), from the faults latched when the test
 * failed, the cell's events, what the run injected and the harness's own stalls (harness/clients/bus-stalls.ts).
 */
async function busStallOf(target: Target, startNs: bigint): Promise<string | undefined> {
  if (!simulatesBusHere(target)) return undefined; // asks the target nothing (a replay must not be asked)
  const judged = hostMayStallBus({ name: target.name, driver: target.driver, sharesHostClock: await sharesClock(target), clock: await describedClock(target) });
  return judged ? hostBusStall(target.client(), startNs, target.injections ?? []) : undefined;
}

const describedClocks = new WeakMap<Target, unknown>();

/** The target's Describe clock ("realtime", "stepped", ...), read once per target; undefined when unreadable. */
async function describedClock(target: Target): Promise<unknown> {
  if (describedClocks.has(target)) return describedClocks.get(target);
  let clock: unknown;
  try {
    const r = await target.client().describe();
    clock = (r.reply.data as { clock?: unknown } | undefined)?.clock;
  } catch {
    clock = undefined;
  }
  describedClocks.set(target, clock);
  return clock;
}

const clockShared = new WeakMap<Target, boolean>();

/**
 * Whether the target's host time (now_host_ns, deadline_host_ns) is this process's monotonic clock: the
 * reference stack on this host on its live clock. Checked once per target against Status (a stepped clock or
 * another host's is not), so that a grant's deadline can be compared with when the harness sent a request.
 */
async function sharesClock(target: Target): Promise<boolean> {
  const known = clockShared.get(target);
  if (known !== undefined) return known;
  let shared = false;
  if (target.name !== 'external') {
    try {
      const t0 = process.hrtime.bigint();
      const r = await target.client().status();
      const t1 = process.hrtime.bigint();
      const now = (r.reply.data as { now_host_ns?: unknown } | undefined)?.now_host_ns;
      shared = typeof now === 'bigint' && now >= t0 && now <= t1;
    } catch {
      shared = false;
    }
  }
  clockShared.set(target, shared);
  return shared;
}

/**
 * A planted harness fault (hil run --plant harness_fault@PART-OF-A-TEST-NAME): the named test throws a
 * TypeError before it starts, as a bug of the harness would. It shows that a harness fault is ERROR
 * whatever the expectation file says of the test (README "Verdicts"); nothing reaches the target.
 */
function plantHarnessFault(name: string): void {
  const plant = process.env.HIL_PLANT;
  const PREFIX = 'harness_fault@';
  if (plant?.startsWith(PREFIX) && name.includes(plant.slice(PREFIX.length))) throw new TypeError(`planted harness fault (HIL_PLANT=${plant}): the harness broke in this test`);
}

/**
 * When a test fails, what the stacks it used wrote on stderr goes to the console and the Allure result: a
 * closed connection says little, the service's own last words (a crash, a refused start) say why.
 */
function reportDiagnostics(targets: readonly Target[]): void {
  for (const t of targets) {
    const text = t.diagnostics().trim();
    if (!text) continue;
    const tail = text.length > 6000 ? `...${text.slice(-6000)}` : text;
    process.stderr.write(`--- stderr of the ${t.name} target (${t.driver}) ---\n${redact(tail)}\n---\n`);
    noteStderr(`${t.name} (${t.driver})`, text);
    Promise.resolve(allure.attachment(`${t.name} stderr`, redact(text), { contentType: 'text/plain' })).catch(() => undefined);
  }
}

/**
 * The `variant` fixture's logic: validate (malformed options throw HIL_ERR_VARIANT_INVALID on every
 * target), skip with the target's reason when it cannot provide the variant, otherwise start it and
 * remember it for closing.
 */
export async function openVariantOrSkip(
  variants: ReturnType<typeof variantsFromEnv>,
  options: VariantOptions,
  skip: (note: string) => never,
  opened: Target[],
): Promise<Target> {
  const why = variants.cannotProvide(options);
  if (why !== undefined) skip(why);
  const v = await variants.open(options);
  opened.push(v);
  return v;
}

/**
 * The fixtures of a cell on the stepped clock, for a test of a file that moves its cell through its
 * CellDriver (stepsItsCell) and is exact only where the clock is stepped: the file's own cell where it runs
 * on that clock (the sim target), otherwise a stepped variant where the target can give one (a recorded
 * run, whose file stacks keep the real-time clock its recordings are made on: the variant is recorded with
 * the test, its steps replayed), otherwise `cannot`, the target's reason (an external service, a rig), for
 * the test to skip with or to go on in real time with its own fixtures.
 */
export async function steppedCell(x: CellFixtures, variant: VariantOf): Promise<{ x: CellFixtures } | { cannot: string }> {
  if (x.drive.stepped) return { x };
  const cannot = variantsFromEnv().cannotProvide({ clock: 'stepped' });
  if (cannot !== undefined) return { cannot };
  const target = await variant({ clock: 'stepped' });
  const client = target.client();
  const description = await describeOf(client);
  const drive = driverOf(target, client, description);
  const cell = new Cell(client, description.binding, false, drive);
  return { x: { cell, client, description, drive, op: opOf(cell, drive), target, skip: x.skip } };
}

/** The target's Describe, with its binding or the run's where Describe reports none (harness/targets/binding.ts). */
async function describeOf(client: ControlClient): Promise<Description> {
  const r = await client.describe();
  if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `describe answered ${r.status} ${r.reply.error}`, { detail: { status: r.status, label: r.label } });
  return withBinding(r.reply.data as Record<string, unknown>) as unknown as Description;
}

/** An operation fenced by the cell's session and answered through its driver (a stepped one steps for it). */
function opOf(cell: Cell, drive: CellDriver): Op {
  return (operation, s, fields) => drive.answer(cell.fenced(operation, s, fields), 5);
}

/** A variant that the tests of one describe block share (see sharedVariant). */
export interface SharedVariant<D> {
  /** Why the target cannot provide the variant (tests skip with it), or undefined once it is open. */
  readonly cannot: string | undefined;
  readonly target: Target;
  readonly cell: Cell;
  /** Describe's data from the variant. */
  readonly description: D;
}

/**
 * Open a variant once for the tests of the enclosing describe block (beforeAll) and close it after them,
 * leaving its cell stopped and released; after each test its cell's grants are released. On a target that
 * cannot provide it nothing is opened and `cannot` holds the target's reason: each test starts with
 * `skip(v.cannot !== undefined, v.cannot)`.
 * Reading `target`, `cell` or `description` of a variant that is not open is a harness error.
 */
export function sharedVariant<D extends { binding: Description['binding'] } = Description>(options: VariantOptions): SharedVariant<D> {
  let cannot: string | undefined;
  let opened: { target: Target; cell: Cell; description: D } | undefined;
  const need = () => {
    if (!opened) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', `the shared variant is not open${cannot ? `: ${cannot}` : ''}`);
    return opened;
  };
  const open = async () => {
    const variants = variantsFromEnv();
    cannot = variants.cannotProvide(options);
    if (cannot !== undefined) return;
    const target = await variants.open(options);
    const client = target.client();
    const r = await client.describe();
    if (r.status !== 200) {
      await target.close();
      throw new HarnessError('HIL_ERR_TARGET_REFUSED', `describe answered ${r.status} ${r.reply.error}`, { detail: { status: r.status, label: r.label } });
    }
    const description = withBinding(r.reply.data as Record<string, unknown>) as unknown as D;
    opened = { target, cell: new Cell(client, description.binding, false, driverOf(target, client, description)), description };
  };
  const close = async () => {
    const o = opened;
    opened = undefined;
    if (!o) return;
    try {
      await o.cell.cleanup();
    } finally {
      await o.target.close();
    }
  };
  // A run with stacks per test (the target's recorder, harness/targets/test-stacks.ts): the shared variant is then opened for each
  // test, as that test's first variant, so that it belongs to that test as its other stacks do.
  if (perTestStacks()) {
    beforeEach(async ({ task }) => {
      // Hooks run before the test's fixtures: enter the test here, so the variant is filed under it.
      enterTest(task.fullName);
      await open();
    });
    afterEach(close);
  } else {
    beforeAll(open);
    // Each test leaves the variant's cell released, as a variant opened per test would be: a test that
    // failed before its own cleanup kept its grant (and its renewals), and every later test of the block
    // then met control_already_owned, failures that said nothing about the target.
    afterEach(async ({ task }) => {
      const failed = task.result?.state === 'fail';
      if (failed && opened) await clearInjected(opened.target);
      await opened?.cell.cleanup({ resetFaults: failed });
    });
    afterAll(close);
  }
  return {
    get cannot() {
      return cannot;
    },
    get target() {
      return need().target;
    },
    get cell() {
      return need().cell;
    },
    get description() {
      return need().description;
    },
  };
}

/** Clear the fault conditions injected into a target through its test channel, if any were; never throws. */
async function clearInjected(target: Target): Promise<void> {
  if (!target.abilities.faultInjection || (target.injections !== undefined && target.injections.length === 0)) return;
  try {
    await target.inject({ kind: 'clear' });
  } catch {
    // A target that stopped answering: the next test meets it as it is and says so.
  }
}

/**
 * A temporary directory for a file or a describe block: its path now (to name in options at collection),
 * the directory itself made before the block's first hook and removed after its last. Made at collection,
 * it was left behind by every collection that runs no hooks (`hil coverage`, a run's traceability count).
 * Call it before the hooks that use it are registered (a sharedVariant's).
 */
export function scratchDir(prefix: string): string {
  // Six characters after the prefix, as mkdtemp names it: a recording names a variant's directory by its
  // name without them (harness/targets/recording-store.ts byName), so a replay finds the same options.
  const dir = join(tmpdir(), `${prefix}-${randomUUID().slice(0, 6)}`);
  beforeAll(() => void mkdirSync(dir, { recursive: true }));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Start a remote listener stack (harness/targets/remote.ts) for the file or the test. */
export type OpenRemote = (options?: RemoteOptions) => Promise<RemoteStack>;

/**
 * Remote listener stacks that a file's tests open themselves: each is stopped when the test that opened it
 * finishes (one opened in a hook, after the file). On a recorded or replayed run every one is stopped by
 * the afterEach hook, before the test's outcome is taken: there it is one of that test's variants
 * (recorded beside its recording, replayed from it).
 */
export function remoteStacks(): OpenRemote {
  const opened: RemoteStack[] = [];
  const stop = async () => {
    for (const s of opened.splice(0).reverse()) await s.stop();
  };
  if (perTestStacks()) afterEach(stop);
  else afterAll(stop);
  return async (o) => {
    const s = await startRemoteStack(o);
    opened.push(s);
    // A stack opened inside a test is that test's: stopped when it finishes, so that its stack host can serve
    // the file's next stack instead of a new host starting for each (harness/targets/program-host.ts). One
    // opened outside a test (a hook) stops with the file.
    try {
      onTestFinished(async () => {
        const i = opened.indexOf(s);
        if (i < 0) return;
        opened.splice(i, 1);
        await s.stop();
      });
    } catch {
      // not inside a test
    }
    return s;
  };
}

/** Remote stacks shared by a file's tests (see sharedRemote). */
export interface SharedRemote {
  /** Why the target cannot start them (the tests are skipped with it), or undefined. */
  readonly cannot: string | undefined;
  /** The stacks are open (on a run with stacks per test: for the current test). */
  readonly opened: boolean;
}

/**
 * Remote listener stacks shared by a file's tests, and what the file derives from them (clients, cells,
 * credentials, in the file's own variables): `setup` opens them with `open`, sets the variables, and may
 * return a cleanup that runs before the stacks stop. On a plain run it runs once for the file (beforeAll),
 * as before: a remote stack costs a pair and a stack start. On a recorded or replayed run it runs before
 * each test, once the test is entered, so every stack it opens is one of that test's variants (recorded
 * and replayed with it, like sharedVariant) and every variable holds that test's stack (a port, an origin
 * or a pair directory of another test's stack would be gone); the stacks stop after the test. When the
 * target cannot start one of them (an external target, which reaches at most the one listener the run
 * names; on the replay target a stepped clock or a stack not recorded) nothing stays open and every test
 * is skipped with the reason. A file that can do with less checks cannotStartRemote before it opens one.
 */
export function sharedRemote(setup: (open: OpenRemote) => Promise<void | (() => Promise<void>)>): SharedRemote {
  let cannot: string | undefined;
  const stacks: RemoteStack[] = [];
  let cleanup: (() => Promise<void>) | undefined;
  const open: OpenRemote = async (o) => {
    cannot = cannotStartRemote(o);
    const s = await startRemoteStack(o);
    stacks.push(s);
    return s;
  };
  const close = async () => {
    const c = cleanup;
    cleanup = undefined;
    try {
      await c?.();
    } finally {
      for (const s of stacks.splice(0).reverse()) await s.stop();
    }
  };
  const up = async () => {
    cannot = undefined;
    try {
      cleanup = (await setup(open)) ?? undefined;
    } catch (e) {
      await close();
      if (cannot === undefined) throw e;
    }
  };
  if (perTestStacks()) {
    beforeEach(async ({ task, skip }) => {
      // Hooks run before the test's fixtures: enter the test here, so the stacks are filed under it.
      enterTest(task.fullName);
      await up();
      if (cannot !== undefined) {
        leaveTest();
        skip(cannot);
      }
    });
    afterEach(close);
  } else {
    beforeAll(up);
    afterAll(close);
    beforeEach(({ skip }) => skip(cannot !== undefined, cannot));
  }
  return {
    get cannot() {
      return cannot;
    },
    get opened() {
      return stacks.length > 0;
    },
  };
}

/** Leave a note of what the run was attached to, for run.json and the report. */
function recordTarget(target: Target, d: Description): void {
  try {
    mkdirSync(RUN_DIR, { recursive: true });
    writeFileSync(
      join(RUN_DIR, `target-${process.pid}.json`),
      stringifyExact({ name: target.name, driver: target.driver, address: target.address, describe: d }),
    );
  } catch {
    // An output sink never aborts a run.
  }
}

/** Skip unless the target can inject faults, with the reason stated. */
export function needsFaults(ctx: { skip: (c: boolean, note?: string) => void }, target: Target): void {
  ctx.skip(!target.abilities.faultInjection, `target ${target.name} cannot inject faults`);
}

/**
 * The long tier (harness/long-tier.ts): tests that must wait out a documented bound longer than a whole
 * daily run (the remote listener's 65 s reply write bound, the 90 s idle closes). They run with `hil run
 * --long` and in `hil nightly`; elsewhere they skip and say how to run them, so the run's record shows the
 * item as covered but not verified.
 */
export function longTier(ctx: { skip: (c: boolean, note?: string) => void }): void {
  ctx.skip(!longTierOn(), 'long tier (a documented bound of more than a minute): runs with hil run --long and in hil nightly');
}

/** Why a test that energises drives skips where the run did not allow motion (a rig says more: motionRefusal). */
const motionNotAllowed = (target: string) => `motion is not allowed on target ${target}: run with --allow-motion when the cell behind the service may move`;

export function needsMotion(ctx: { skip: (c: boolean, note?: string) => void }, target: Target): void {
  ctx.skip(!target.abilities.motion, target.motionRefusal ?? motionNotAllowed(target.name));
}

/**
 * needsMotion for a file that opens no target of its own (its stacks are remote stacks it starts): what the
 * run allows, read from the target's descriptor and options (always, or only with --allow-motion).
 */
export function needsRunMotion(ctx: { skip: (c: boolean, note?: string) => void }): void {
  const t = targetFromEnv();
  ctx.skip(t.abilities.motion !== 'always' && t.options.allowMotion !== true, motionNotAllowed(t.name));
}

/**
 * `test` for suites that latch faults and inject conditions: after each test the cell is released,
 * injected conditions are removed and latched fault bits are reset (a reset retires its own session),
 * so the next test starts from a clean cell. The cell's time is moved on as its clock needs (the `drive`
 * fixture: a stepped file stack, stepsItsCell, is stepped).
 */
export const recoveringTest = test.extend<{ recover: void }>({
  recover: [
    async ({ cell, target, drive }, use) => {
      await use();
      await cell.cleanup();
      if (target.abilities.faultInjection) {
        await target.inject({ kind: 'clear' });
        // A cleared condition leaves the cell's image in its next cycle, which a stepped cell runs only when
        // stepped: the next test would meet it otherwise.
        if (drive.stepped) await drive.elapse(10);
      }
      const st = await drive.status((x) => x.core !== null && x.core.armed === 0n, 3_000);
      if (st.core && st.core.execution_fault_reasons !== 0n) {
        const s = await cell.grant();
        // Answered from an observation newer than the request (document 1 part 4 reset_fault).
        await drive.answerWithin(cell.fenced('reset_fault', s, { axis_mask: 0 }), 1_000);
        await cell.cleanup();
      }
    },
    { auto: true },
  ],
});
