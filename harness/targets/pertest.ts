// One stack per test, for recording and replaying test by test (issue 9; docs/recording.md "Per test").
//
// Decision: a recorded run (`hil run --record DIR`) starts a fresh reference stack for every test, recording
// that stack's whole session, instead of asking one long-lived stack to cut its recording at test
// boundaries. A replay starts from a fresh core (power-on drives, no grant, no history), so the only
// recording that replays cycle for cycle is one that started from the same fresh core. It costs one stack
// start per test (about a second), which is why only a recorded or replayed run pays it.
//
// Recordings live under DIR/<target>/<machine_sha256>/<file>/<slug>-<hash>.hilrec with a <same>.json beside
// each naming the test, so a changed machine configuration never finds the old recordings by accident, and
// a recording found under another digest is reported as stale with both digests.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The test the harness is running now (set by the per-test fixture before any target fixture). */
let current: string | undefined;

export function setCurrentTest(id: string | undefined): void {
  // Already entered by a beforeEach hook (a shared variant opened per test): keep what that hook noted.
  if (id !== undefined && id === current) return;
  current = id;
  drawn = {};
  recordedProperties = {};
  variantsOpened = 0;
  variantOutcomes.length = 0;
}

// Variant stacks (a test's `variant({...})`) are recorded and replayed test by test too: the n-th variant a
// test opens is recorded beside the test's own recording as <same>.variant-<n>.hilrec, with its options in
// the sidecar. A test opens its variants in the same order every time it runs, so n finds the recording.
let variantsOpened = 0;
const variantOutcomes: PerTestOutcome[] = [];

/** The index the next variant the current test opens gets (1, 2, ...), without taking it. */
export function peekVariantIndex(): number {
  return variantsOpened + 1;
}
/** Take the next variant index of the current test. */
export function takeVariantIndex(): number {
  return ++variantsOpened;
}
/** A recorded or replayed variant stack of the current test has stopped: what happened to its recording. */
export function noteVariantOutcome(o: PerTestOutcome): void {
  if (current !== undefined) variantOutcomes.push(o);
}
/** The current test's variant outcomes so far (and forget them). */
export function takeVariantOutcomes(): PerTestOutcome[] {
  return variantOutcomes.splice(0);
}
/** Where the n-th variant stack of `testId` is recorded. */
export function variantRecordingPath(dir: string, target: string, machineSha256: string, testId: string, n: number): string {
  return recordingPath(dir, target, machineSha256, testId).replace(/\.hilrec$/, `.variant-${n}.hilrec`);
}
/**
 * Variant options as they are kept in a sidecar and compared on replay: keys sorted, bigints as decimal
 * strings, and a file system path (a variant's machine file, control socket or anchor directory, made in a
 * fresh temporary directory each run) by its last name without mkdtemp's random suffix. What a machine file
 * holds is compared by digest once the replayed stack is up (harness/targets/replay.ts).
 */
export function variantOptionsJson(o: object): string {
  const norm = (v: unknown, key: string): unknown =>
    typeof v === 'bigint'
      ? v.toString()
      : typeof v === 'string' && (key === 'machine' || key === 'controlSocket' || key === 'dir')
        ? byName(v)
        : Array.isArray(v)
          ? v.map((x) => norm(x, ''))
          : v && typeof v === 'object'
            ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, norm((v as Record<string, unknown>)[k], k)]))
            : v;
  return JSON.stringify(norm(o, ''));
}

/** A path by its last name without mkdtemp's random suffix (what stays the same from one run to the next). */
const byName = (p: string) => (p.includes('/') ? p.slice(p.lastIndexOf('/') + 1).replace(/-[A-Za-z0-9]{6}$/, '') : p);

/**
 * The options of a stack a test starts with flags of its own (a remote listener stack: harness/targets/
 * remote.ts), kept in its variant sidecar and compared on replay like variantOptionsJson: what the stack is
 * (`kind`), its pair id, the variant options its flags came from, and its own `hil serve` arguments with
 * every absolute path by its last name (a machine file, a configuration cache or certificates made in a
 * fresh temporary directory each run; what a machine file holds is compared by digest). The pair's
 * certificates themselves are fresh each run and not part of it: they live in the service, not the core.
 */
export function stackOptionsJson(kind: string, o: { pairId?: string; args?: readonly string[]; variant?: object }): string {
  return variantOptionsJson({
    [kind]: {
      args: (o.args ?? []).map((a) => (a.startsWith('/') ? byName(a) : a)),
      ...(o.pairId !== undefined ? { pair_id: o.pairId } : {}),
      ...(o.variant !== undefined ? { variant: o.variant } : {}),
    },
  });
}

/** A property test's parameters (harness/property.ts): kept with a recording so its replay draws the same cases. */
export interface PropertyParams {
  seed: number;
  numRuns: number;
}
/** The properties the current test ran (name -> parameters), for its recording's sidecar. */
let drawn: Record<string, PropertyParams> = {};
/** Replay: the properties the current test's recording ran with. */
let recordedProperties: Record<string, PropertyParams> = {};

/** harness/property.ts: the current test runs property `name` with these parameters. */
export function noteProperty(name: string, p: PropertyParams): void {
  if (current !== undefined) drawn[name] = p;
}
/** What the current test drew (written beside its recording as `properties`). */
export function drawnProperties(): Record<string, PropertyParams> {
  return { ...drawn };
}
/** Replay: the parameters property `name` ran with when this test was recorded, if it was. */
export function recordedProperty(name: string): PropertyParams | undefined {
  return current === undefined ? undefined : recordedProperties[name];
}
/** Replay: take the `properties` of the current test's sidecar (malformed entries are ignored). */
export function useRecordedProperties(sidecar: Record<string, unknown> | null): void {
  recordedProperties = {};
  const p = sidecar?.properties;
  if (!p || typeof p !== 'object') return;
  for (const [name, v] of Object.entries(p as Record<string, unknown>)) {
    const { seed, numRuns } = (v ?? {}) as { seed?: unknown; numRuns?: unknown };
    if (Number.isInteger(seed) && Number.isInteger(numRuns) && (numRuns as number) > 0) recordedProperties[name] = { seed: seed as number, numRuns: numRuns as number };
  }
}
export function currentTest(): string | undefined {
  return current;
}

/** A target that starts a stack per test: begin before the test's fixtures, end after its cleanup. */
export interface PerTestHooks {
  /** Start the stack for this test (recording or replaying it). */
  begin(testId: string): Promise<void>;
  /** Stop the test's stack and say what happened to its recording. */
  end(): Promise<PerTestOutcome>;
}

export interface PerTestOutcome {
  recording: string;
  /** A variant stack's outcome: which of the test's variants (1, 2, ...). */
  variant?: number;
  /** A later core incarnation of the stack (its core restarted): 2, 3, ... */
  incarnation?: number;
  mode: 'record' | 'replay';
  /** Replay: the stack's verdict (drivers' PacedVerdict as JSON), or null when it wrote none. */
  verdict?: ReplayVerdict | null;
}

/** The verdict file a paced replay writes (its JSON shape; the harness reads it, never the code). */
export interface ReplayVerdict {
  file: string;
  mode: string;
  run: string | null;
  recorded: { frames: number; complete: boolean; requests: number; outputs: number; machine_sha256?: string; configuration_sha256?: string };
  cycles: number;
  requests_matched: number;
  outputs_matched: number;
  requests_unsent: number;
  requests_extra: number;
  outputs_missing: number;
  first_unsent?: { cycle: number; kind: string; data: unknown } | null;
  renewals_replayed?: number;
  /** Format 2: 'recorded' (the service's clock and lease expiries followed the recording) or 'live'. */
  service_clock?: 'recorded' | 'live';
  expiries_replayed?: number;
  /** Wall-clock pacing: recorded time per wall time (1: as recorded), null: flat out. */
  pace?: number | null;
  live_renewals?: number;
  /** Format 3: the service's answers to control and program requests, recorded and matched. */
  service_replies?: { recorded: number; matched: number; first_missing: unknown };
  divergence: null | { kind: string; cycle: number; path?: string; expected?: unknown; actual?: unknown; bus?: Record<string, unknown> };
  /** Holds the replay could not keep (sims/replay/sync-points.ts LostHold): kind, the core's cycle, what was waited for. */
  holds_lost?: Array<{ kind: string; cycle: number; detail?: string }>;
  end: null | { cycle: number; complete?: boolean };
  wall_ms: number;
  recorded_ms: number;
}

/** The open per-test targets of this worker (the file's target registers itself). */
const open = new Set<PerTestHooks>();
export function registerPerTest(t: PerTestHooks): () => void {
  open.add(t);
  return () => open.delete(t);
}
export function perTestTargets(): PerTestHooks[] {
  return [...open];
}

const slug = (s: string) =>
  s
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 80);

/** Where the recording of `testId` lives for this target and machine digest. */
export function recordingPath(dir: string, target: string, machineSha256: string, testId: string): string {
  const [file = '', ...rest] = testId.split(' > ');
  const name = `${slug(rest.join(' > ')) || 'test'}-${createHash('sha256').update(testId).digest('hex').slice(0, 12)}.hilrec`;
  return join(dir, target, machineSha256, slug(file), name);
}

export type Lookup =
  | { kind: 'found'; path: string }
  | { kind: 'stackless'; sidecar: string }
  | { kind: 'not_recorded' }
  | { kind: 'stale'; path: string; recordedMachine: string };

/** The sidecar of a recording path. */
const sidecarOf = (path: string) => path.replace(/\.hilrec$/, '.json');

/** A test recorded without a stack (it never opened the target): only its sidecar, `stack: false`. */
function stacklessAt(path: string): boolean {
  return !existsSync(path) && readSidecar(path)?.stack === false;
}

/**
 * Find the recording of `testId` for the configuration with this machine digest. A recording of the same
 * test under another machine digest is stale (both digests reported); none at all is "not recorded". A test
 * that ran without a stack when recorded has a sidecar saying so and no recording ('stackless').
 */
export function findRecording(dir: string, target: string, machineSha256: string, testId: string): Lookup {
  const want = recordingPath(dir, target, machineSha256, testId);
  if (existsSync(want)) return { kind: 'found', path: want };
  if (stacklessAt(want)) return { kind: 'stackless', sidecar: sidecarOf(want) };
  const base = join(dir, target);
  if (existsSync(base)) {
    for (const d of readdirSync(base)) {
      if (d === machineSha256) continue;
      const other = recordingPath(dir, target, d, testId);
      if (existsSync(other) || stacklessAt(other)) return { kind: 'stale', path: other, recordedMachine: d };
    }
  }
  return { kind: 'not_recorded' };
}

/**
 * A recorded run: the test never opened the target (no stack, nothing to record). Its sidecar says so, so
 * the replay runs it as it ran then (without a stack) instead of skipping it as not recorded.
 */
export function writeStacklessSidecar(dir: string, target: string, machineSha256: string, testId: string, properties: Record<string, PropertyParams>, wallMs?: number): string {
  const path = sidecarOf(recordingPath(dir, target, machineSha256, testId));
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(
    path,
    JSON.stringify({ test: testId, target, machine_sha256: machineSha256, stack: false, recorded_at: new Date().toISOString(), ...(Object.keys(properties).length ? { properties } : {}), ...(wallMs !== undefined ? { test_wall_ms: wallMs } : {}) }, null, 2) + '\n',
  );
  return path;
}

/** Read the per-test sidecar written beside a recording (test id, target, digests). */
export function readSidecar(path: string): Record<string, unknown> | null {
  try {
    return JSON.parse(readFileSync(sidecarOf(path), 'utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}
