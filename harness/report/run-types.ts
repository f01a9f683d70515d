// The run record the harness writes to reports/run.json at the end of every run (hil run, npm test).
// The HTML qualification report (hil report) is rendered from it plus reports/allure-results/.

import type { CoverageEntry } from '../catalogue/gate.ts';
import type { TestEvidence } from '../evidence.ts';
import type { MeasurementRecord } from '../measure.ts';

/** A catalogue item's coverage in this run (defined beside the gate: the catalogue never imports the report). */
export type { CoverageEntry };

export type TestState = 'passed' | 'failed' | 'skipped' | 'errored';

/** A target's expectation for a test (fixtures/expectations/<target>.json, harness/report/expectations.ts). */
export type { Expectation, Outcome } from './expectations.ts';
import type { Outcome } from './expectations.ts';

export interface RunTest {
  /** Path of the test file relative to the project root, e.g. suites/grant/grant.test.ts */
  file: string;
  /** vitest project: unit or conformance */
  project: string;
  /** Test name and full name (describe blocks joined with " > "). */
  name: string;
  fullName: string;
  state: TestState;
  duration_ms: number;
  /** Catalogue ids this test declares it covers. */
  covers: string[];
  /** contract (documented behaviour) or profile (a decision in docs/profile.md); unit for project self-tests */
  kind: 'contract' | 'profile' | 'unit';
  /** Why it was skipped (capability missing, target cannot inject faults ...). */
  skip_reason?: string;
  /** Failure messages (assertion text, first lines of the stack). */
  errors?: string[];
  /** Per-target expectation: the outcome is one the expectation file allows for this test (not PASS), and why. */
  expected_failure?: string;
  /** The expectation allowed only failures but it passed. */
  unexpected_pass?: boolean;
  /**
   * The outcomes the target's expectation file allows for this test, where a rule applies. An outcome
   * outside them keeps its own class (an ERROR where FAIL was expected is an ERROR).
   */
  expected_outcomes?: Outcome[];
  /**
   * The harness's host was too slow for a timing rule the test checks (HIL_ERR_HOST_TOO_SLOW): the figures
   * measured (harness/lateness.ts). The test is ERROR, never FAIL.
   */
  host_too_slow?: string;
  /** The harness's own event-loop lateness while the test ran, ms (harness/lateness.ts). */
  harness_lateness?: { p99_ms: number; max_ms: number };
  /**
   * On a target other than the reference stack: a profile test (kind profile) that failed, reported as an
   * informative difference from our decision in docs/profile.md, not as a failure (DESIGN.md rule 3).
   */
  informative?: string;
  /** Profile checks inside the test (harness/trace.ts inProfile) the target answered otherwise. */
  profile_differences?: Array<{ profile: string; message: string }>;
  /** Measurements, motion plot data, run samples and (failed tests) the transcript (harness/evidence.ts). */
  evidence?: TestEvidence;
}

/** The run's own measurements, merged from its tests' samples (harness/report/run-measurements.ts). */
export interface RunMeasurements {
  measurements: MeasurementRecord[];
  /** Cycle lateness histogram for the report's plot: [upper edge us, count] per bucket, and the limit. */
  lateness_histogram?: { upper_us: number; count: number }[];
  lateness_limit_us?: number;
}

export const RUN_SCHEMA = 'cell-hil.run.v3';

/** Figures of a `hil fuzz` run (harness/model/): what the model exercised and how often. */
export interface ModelFuzzFigures {
  target: string;
  clock: 'stepped' | 'real time';
  minutes: number;
  seeds: number[];
  passed: boolean;
  /** The first line of the failure (the failing sequence is printed by hil fuzz). */
  failure?: string;
  sequences: number;
  commands: number;
  transitions_reached: number;
  /** Catalogue-style transition names (transition:...) and how many times the run reached each. */
  per_transition: Record<string, number>;
  /** Every rule, transition and outcome name the model reached, with its count. */
  per_rule: Record<string, number>;
  wall_ms: number;
}

export interface RunRecord {
  /** v2 added measurements (tests' evidence and the run's); v3 the model's figures; v1 and v2 records are still read. */
  schema: typeof RUN_SCHEMA | 'cell-hil.run.v2';
  command: string;
  started_at: string; // ISO 8601
  finished_at: string;
  target: {
    name: string; // sim | external | replay | rig
    driver: string; // sim | replay | ethercat | unknown
    address: string; // socket path or URL
    simulated: boolean | null;
    /** Description data as returned by GET /v1/describe, if the target answered. */
    describe?: unknown;
    /**
     * A run on the replay target: the recordings directory, the mode, and each test's recording with what
     * its replay found (docs/recording.md "The replay target").
     */
    replay?: { recordings: string; mode: string; tests: RecordingUse[] };
    /** A recorded run (`hil run --record DIR`): where each test's recording was written. */
    recording?: { dir: string; tests: RecordingUse[] };
  };
  environment: {
    machine_sha256: string;
    configuration_sha256: string;
    deployment_sha256: string;
    package_version: string;
    git_revision: string;
    node: string;
    platform: string;
    hostname: string;
  };
  tests: RunTest[];
  coverage: CoverageEntry[];
  summary: { passed: number; failed: number; skipped: number; errored: number; duration_ms: number };
  gate: { ok: boolean; problems: string[] };
  /** Measurements of the run as a whole (absent in v1 records). */
  run_measurements?: RunMeasurements;
  /** What the run selected: file filters, a shard (vitest --shard i/n), a test name pattern. A whole run has none. */
  selection?: { filters: string[]; shard?: string; grep?: string };
  /** Entries of the target's expectation file that name no test of this (whole) run. */
  stale_expectations?: string[];
  /** v3: figures of the model-based runs (`hil fuzz` writes `fuzz`). */
  model?: { fuzz?: ModelFuzzFigures };
  /** The host the run ran on: its cores, the workers, the load average over the run and the harness's own lateness. */
  host?: HostRecord;
  /** `hil nightly`: the soak after the run (harness/soak.ts); its limits are part of the run's verdict. */
  soak?: SoakRecord;
  /** `hil merge`: the runs merged, each with its own times (records merged before 2026-11-27 have no finish or duration). */
  shards?: { command: string; hostname: string; target: string; started_at: string; finished_at?: string; duration_ms?: number; selection?: RunRecord['selection'] }[];
}

/** The host a run ran on (the report's environment; README "Verdicts"). */
export interface HostRecord {
  cores: number;
  /** Test workers the run used (hil run --workers, or chosen from the cores and the load). */
  workers?: number;
  /** The 1-minute load average when the run started, its mean and its maximum over the run. */
  load1?: { start: number; mean: number; max: number; samples: number };
  /** The harness's event-loop lateness over the run's tests: the tests' p99 and worst, ms. */
  harness_lateness?: { tests: number; p99_ms: number; max_ms: number; worst_test?: string };
  /** Tests that ended in HIL_ERR_HOST_TOO_SLOW. */
  host_too_slow?: number;
  /** hil run --busy-loops N: processes keeping a core busy each beside the run, on purpose. */
  busy_loops?: number;
  /**
   * CPU time the hypervisor took from this virtual machine's cores over the run (Linux /proc/stat steal), s:
   * every thread of the harness and the target stalls through it, whatever its priority. Absent where the
   * counter cannot be read.
   */
  steal_s?: number;
}

/** The nightly soak's figures (harness/soak.ts). */
export interface SoakRecord {
  seconds: number;
  measurements: MeasurementRecord[];
  /** The first renewal the target refused: seconds into the soak, status and the error text. */
  first_refusal?: { at_s: number; status: number; error: string };
  /** The refusal was the host's doing, not the target's (harness/clients/keeper.ts judgeRenewals): the figures. */
  host_too_slow?: string;
}

/** One test's recording in a recorded or replayed run. */
export interface RecordingUse {
  test: string;
  recording: string;
  /** Replay: one line of what the replay found (requests, replies and events matched; the divergence). */
  verdict?: string;
  diverged?: boolean;
  /** Wall time of the test, ms: as recorded (on a replay, from the recording's sidecar) and as run now. */
  recorded_wall_ms?: number;
  wall_ms?: number;
  /** Where the test's wall time went, ms: its stacks' start, its body (fixtures and test), their stop (test-stacks.ts). */
  phases_ms?: { start: number; body: number; stop: number };
}
