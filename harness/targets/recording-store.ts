// Where a recorded suite run keeps its recordings, and the only place that builds their names:
// a test's recording, its sidecar, its variants' recordings and a restarted core's incarnations. The
// recorder (harness/targets/recorder.ts) asks it for every path it records into or replays from.
//
// Layout (docs/recording.md "Recording a suite run"):
//   DIR/<target>/<machine_sha256>/<file slug>/<name slug>-<12 hex of sha256(test id)>.hilrec   a test's stack
//   <same>.json                                   its sidecar (test, digests, property seeds, wall time)
//   <same>.variant-<n>.hilrec / .json             the n-th variant stack the test opened, and its sidecar
//   <any of those less .hilrec>.core-<n>.hilrec   the n-th core incarnation of that stack (a core restart)
// A changed machine configuration never finds the old recordings by accident, and a recording found under
// another digest is reported as stale with both digests.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { incarnationFile } from '../../fixtures/contract/recording-files.ts';

/** A property test's parameters (harness/property.ts): kept with a recording so its replay draws the same cases. */
export interface PropertyParams {
  seed: number;
  numRuns: number;
}

export type Lookup =
  | { kind: 'found'; path: string }
  | { kind: 'stackless'; sidecar: string }
  | { kind: 'not_recorded' }
  | { kind: 'stale'; path: string; recordedMachine: string };

const slug = (s: string) =>
  s
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 80);

export class RecordingStore {
  /** `target`: the kind of target the recordings were made on (the sim target: our stack). */
  constructor(
    readonly dir: string,
    readonly target = 'sim',
  ) {}

  /** Where the recording of `testId`'s own stack lives for this machine digest. */
  testRecording(machineSha256: string, testId: string): string {
    const [file = '', ...rest] = testId.split(' > ');
    const name = `${slug(rest.join(' > ')) || 'test'}-${createHash('sha256').update(testId).digest('hex').slice(0, 12)}.hilrec`;
    return join(this.dir, this.target, machineSha256, slug(file), name);
  }

  /**
   * Of the suite files `files` (paths from the root, as a test id starts), those with anything recorded,
   * under any machine digest (one recorded for another digest is still replayed, to be reported as stale):
   * a test's recording or sidecar lies in the directory named after its file.
   */
  recordedFiles(files: readonly string[]): string[] {
    const base = join(this.dir, this.target);
    const held = new Set<string>();
    const dirs = (d: string) => {
      try {
        return readdirSync(d, { withFileTypes: true }).filter((e) => e.isDirectory());
      } catch {
        return [];
      }
    };
    for (const digest of dirs(base)) for (const f of dirs(join(base, digest.name))) if (readdirSync(join(base, digest.name, f.name)).length) held.add(f.name);
    return files.filter((f) => held.has(slug(f)));
  }

  /** Where the n-th variant stack (1, 2, ...) `testId` opened is recorded: beside the test's own. */
  variantRecording(machineSha256: string, testId: string, n: number): string {
    return this.testRecording(machineSha256, testId).replace(/\.hilrec$/, `.variant-${n}.hilrec`);
  }

  /** The recording's run name (`hil serve --record-run`): the test id, and which variant. */
  static runName(testId: string, variant?: number): string {
    return variant === undefined ? testId : `${testId} (variant ${variant})`;
  }

  /** The sidecar of a recording (`<same>.json`). */
  static sidecar(recording: string): string {
    return recording.replace(/\.hilrec$/, '.json');
  }

  /**
   * The n-th core incarnation of a recording or of a replay verdict file (n = 1: the file itself). The
   * stack names them by the same rule (fixtures/contract/recording-files.ts).
   */
  static incarnation(file: string, n: number): string {
    return incarnationFile(file, n, file.endsWith('.json') ? 'json' : 'hilrec');
  }

  /** Read a recording's sidecar (test id, target, digests), or null when there is none or it is not JSON. */
  static readSidecar(recording: string): Record<string, unknown> | null {
    try {
      return JSON.parse(readFileSync(RecordingStore.sidecar(recording), 'utf8')) as Record<string, unknown>;
    } catch {
      return null;
    }
  }

  /** Write a recording's sidecar (its directory made if need be). */
  static writeSidecar(recording: string, fields: Record<string, unknown>): string {
    const path = RecordingStore.sidecar(recording);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, JSON.stringify(fields, null, 2) + '\n');
    return path;
  }

  /** Add fields to an existing sidecar; an output sink, so it never throws (no sidecar: nothing to add to). */
  static noteSidecar(recording: string, fields: Record<string, unknown>): void {
    const now = RecordingStore.readSidecar(recording);
    if (!now) return;
    try {
      RecordingStore.writeSidecar(recording, { ...now, ...fields });
    } catch {
      // an output sink never aborts a run
    }
  }

  /** A test recorded without a stack (it never opened the target): only its sidecar, `stack: false`. */
  private stacklessAt(recording: string): boolean {
    return !existsSync(recording) && RecordingStore.readSidecar(recording)?.stack === false;
  }

  /**
   * Find the recording of `testId` for the configuration with this machine digest. A recording of the same
   * test under another machine digest is stale (both digests reported); none at all is "not recorded". A test
   * that ran without a stack when recorded has a sidecar saying so and no recording ('stackless').
   */
  find(machineSha256: string, testId: string): Lookup {
    const want = this.testRecording(machineSha256, testId);
    if (existsSync(want)) return { kind: 'found', path: want };
    if (this.stacklessAt(want)) return { kind: 'stackless', sidecar: RecordingStore.sidecar(want) };
    const base = join(this.dir, this.target);
    if (existsSync(base)) {
      for (const d of readdirSync(base)) {
        if (d === machineSha256) continue;
        const other = this.testRecording(d, testId);
        if (existsSync(other) || this.stacklessAt(other)) return { kind: 'stale', path: other, recordedMachine: d };
      }
    }
    return { kind: 'not_recorded' };
  }

  /**
   * A recorded run: the test never opened the target (no stack, nothing to record). Its sidecar says so, so
   * the replay runs it as it ran then (without a stack) instead of skipping it as not recorded.
   */
  writeStackless(machineSha256: string, testId: string, properties: Record<string, PropertyParams>, wallMs?: number): string {
    return RecordingStore.writeSidecar(this.testRecording(machineSha256, testId), {
      test: testId,
      target: this.target,
      machine_sha256: machineSha256,
      stack: false,
      recorded_at: new Date().toISOString(),
      ...(Object.keys(properties).length ? { properties } : {}),
      ...(wallMs !== undefined ? { test_wall_ms: wallMs } : {}),
    });
  }
}

/**
 * Variant options as they are kept in a sidecar and compared on replay: keys sorted, bigints as decimal
 * strings, and a file system path (a variant's machine file, control socket or anchor directory, made in a
 * fresh temporary directory each run) by its last name without mkdtemp's random suffix. What a machine file
 * holds is compared by digest once the replayed stack is up (harness/targets/recorder.ts).
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
