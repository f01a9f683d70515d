// The run record the harness writes to reports/run.json at the end of every run (hil run, npm test).
// The HTML qualification report (hil report) is rendered from it plus reports/allure-results/.

import type { CoverageEntry } from '../catalogue/gate.ts';

/** A catalogue item's coverage in this run (defined beside the gate: the catalogue never imports the report). */
export type { CoverageEntry };

export type TestState = 'passed' | 'failed' | 'skipped' | 'errored';

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
  /** Per-target expectation: the expectation file said this test is expected to fail, and why. */
  expected_failure?: string;
  /** The expectation said fail but it passed. */
  unexpected_pass?: boolean;
  /**
   * On a target other than the reference stack: a profile test (kind profile) that failed, reported as an
   * informative difference from our decision in docs/profile.md, not as a failure (DESIGN.md rule 3).
   */
  informative?: string;
  /** Profile checks inside the test (harness/trace.ts inProfile) the target answered otherwise. */
  profile_differences?: Array<{ profile: string; message: string }>;
}

export interface RunRecord {
  schema: 'cell-hil.run.v1';
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
}
