// How a run reaches a system. Each target kind is one module exporting a declarative descriptor
// (TargetDescriptor, the wptrunner habit): its name, what the suites may ask of it, its option schema, `open`,
// and its recorder if any. The registry (index.ts) lists them; nothing else names a target.

import type { ControlClient } from '../clients/control.ts';
import type { VariantOptions } from './variant.ts';
import type { OlpFacts } from './olp-facts.ts';

export type { VariantOptions } from './variant.ts';

export type TargetName = 'sim' | 'external' | 'replay' | 'rig';

/** What a target can do beyond the documented interface; suites skip with a stated reason otherwise. */
export interface TargetAbilities {
  /** Faults can be injected out of band (private test channel of the reference stack). */
  faultInjection: boolean;
  /** The core can be killed and restarted (daemon_restarted scenarios). */
  coreRestart: boolean;
  /** The service can be restarted (adapter incarnation scenarios). */
  serviceRestart: boolean;
  /** Tests that energise drives may run (sim always; a rig only with --allow-motion and a closed E-stop chain). */
  motion: boolean;
  /**
   * Its telemetry records carry the host monotonic time of their cycle (t_ns, document 1 part 2), the time
   * base of the deadlines they carry (jog_input_deadline_host_ns): every running cell. Not a replay, whose
   * records' t_ns run on the recorded clock from the replay's own start (docs/recording.md).
   */
  hostTimedRecords: boolean;
}

/**
 * One option of a target (its descriptor's schema): the `hil run` flag that sets it, the environment variable
 * that carries it to the workers, and the key it has in the target's own options.
 */
export interface TargetOption {
  key: string;
  /** The `hil run` flag (without --), when the option has one; else it is set through the environment only. */
  flag?: string;
  /** The flag's value in the usage line (PATH, URL, DIR...); absent for a boolean flag. */
  value?: string;
  env: string;
  help: string;
  /** `hil run` refuses the run without it. */
  required?: boolean;
  /** `hil run` resolves it to an absolute path before the workers read it. */
  path?: boolean;
  /** How `hil run` hands the value on, when not as given or as an absolute path. */
  resolve?: (v: string) => string;
}

/** Options every target is opened with, besides its own: what the test file declared. */
export interface FileOptions {
  /**
   * The file's tests need no cycle of the file's cell (harness/fixture.ts cycleFree): a target that can,
   * starts the file's stack on this clock; the others ignore it.
   */
  fileClock?: 'stepped';
}

/** What the suites may ask of a kind of target, known before it is opened (`hil run` and the fixture decide by it). */
export interface DescriptorAbilities {
  /** It can start a separately configured stack (variants; whether a given variant can be had: cannotProvide). */
  variants: boolean;
  /** It can start a test's own reference stack (remote listener stacks: startStack). */
  testStacks: boolean;
  /** Its stacks have the private test channel: fault injection, the stepped clock's steps. */
  testChannel: boolean;
  /** `hil run --plant` may inject through that channel (not on a replay: its stack plays a recording). */
  plant: boolean;
  /** `hil run --watch` may rerun its files. */
  watch: boolean;
  /** One service for the whole run: one worker, and after each test every grant its clients left is ended (shared.ts). */
  sharedService: boolean;
  /** Whether tests that energise drives may run: always, or only when the run allows motion (and the target confirms it). */
  motion: 'always' | 'allow-motion';
}

/** What a target's per-test fixture reads of vitest's test context (harness/targets/test-stacks.ts). */
export interface TestContextLike {
  task: { fullName: string; meta: { replayUnheld?: string; hostTooSlow?: string; equipmentLoss?: string }; result?: { errors?: readonly unknown[] } };
  skip: (note?: string) => void;
  /** Called once the test failed, after the runner tore the fixtures down and the other fixtures' own callbacks ran. */
  onTestFailed?: (fn: () => void | Promise<void>) => void;
}

/** A per-test fixture body: runs the test through `use` between its stacks' start and stop. */
export type PerTestFixture = (ctx: TestContextLike, use: () => Promise<void>) => Promise<void>;

/** Where a target's weld planner answers (document 2), and what the harness may do with it. */
export interface PlannerEndpoint {
  /** Base URL, e.g. http://127.0.0.1:8796 (document 2 part 4 {planner_url}). */
  url: string;
  /** The planner's process id when the harness started it (cancellation tests look for its children). */
  pid?: number;
  /** The dense store directory when the harness can read it (store and refused-directory tests). */
  storeDir?: string;
  /** The planner honours the stub's test hooks in program extensions (docs/profile.md "Weld planner stub"). */
  stubHooks: boolean;
}

export interface Target {
  readonly name: TargetName;
  readonly driver: string;
  /** Where the control service answers (socket path). */
  readonly address: string;
  /** The socket directory's public/control.sock when the target has one (reference stack layout). */
  readonly publicAddress: string | undefined;
  readonly abilities: TargetAbilities;
  /** A fresh client on the control socket (closed by the target at close). */
  client(): ControlClient;
  /** Inject a fault through the private channel; throws when the target has none. */
  inject(fault: Record<string, unknown>): Promise<void>;
  /** What was injected so far, each with the host monotonic time it was sent (a stall's judgement: harness/clients/bus-stalls.ts). */
  readonly injections?: readonly { kind: string; at_ns: bigint }[];
  /**
   * A rig only: whether the bench box's heartbeat watchdog opened the E-stop chain under a test that began at
   * `sinceMs` (performance.now()), and whose lapse that was (harness/targets/rig.ts).
   */
  benchLoss?(sinceMs: number): { hostTooSlow?: string; equipment?: string } | undefined;
  restartCore(): Promise<void>;
  /**
   * Stepped clock only (`hil serve --clock stepped`): run `cycles` core cycles now and resolve with the
   * core's time after them. Absent on targets that cannot.
   */
  step?(cycles: number): Promise<bigint>;
  /** Like `step`, with the core's cycle count after it and how many answers (receipts, Home and stop outcomes) its cycles produced. */
  stepReport?(cycles: number): Promise<StepReport>;
  /** Stepped clock: the answers the core owes now, without running a cycle (StepReport.waiting). */
  coreWaits?(): Promise<number>;
  /** Restart the control service process (a new adapter incarnation); throws when the target cannot. */
  restartService(): Promise<void>;
  /**
   * Why this target cannot provide a variant with these options (a skip reason), or undefined when it can.
   * Suites use the `variant` fixture, which validates the options, skips with this reason and closes the
   * variant at the end of the test.
   */
  cannotProvide(options: VariantOptions): string | undefined;
  /**
   * A separately started system with these options (harness/targets/variant.ts), which the caller closes.
   * Rejects with HIL_ERR_VARIANT_INVALID for malformed options and HIL_ERR_VARIANT_UNSUPPORTED when
   * cannotProvide gives a reason.
   */
  variant(options: VariantOptions): Promise<Target>;
  /** Lines the target process wrote to stderr (diagnostics for the report). */
  diagnostics(): string;
  /** The service's process id where the harness started it (the nightly soak samples its memory). */
  readonly pid?: number;
  /**
   * Every process of the target on this host when it has more than `pid` (an external service named with
   * --service-pid and its OLP server), the first `pid`: their run-queue waits count for timing judgments.
   */
  readonly pidsOnHost?: readonly number[];
  /** Why motion is not allowed, in words a skip reason can carry (rig); undefined when it is or the default applies. */
  readonly motionRefusal?: string;
  /** After each test: check the cell is stopped and released, reconciling an unknown outcome (rig). */
  settle?(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A stack of the reference system that a test starts with flags of its own (a remote listener with a pair
 * made for it: harness/targets/remote.ts). Self-contained: the target's own arguments are not added.
 */
export interface TestStack {
  /** `hil serve` arguments (after --socket-dir and --lifeline-stdin) and environment. */
  start: StackStart;
  /** What the stack is, as its recording's sidecar keeps it and a replay compares it (recording-store.ts stackOptionsJson). */
  options: string;
  /** The variant options among its flags, if any (a stepped clock cannot be replayed). */
  variant?: VariantOptions;
}

/**
 * A kind of target, as one module declares it (the wptrunner habit: a product is one dict of name, options
 * and entry points): its name, what the suites may ask of it, its option schema (which `hil run` builds its
 * flags, help and usage errors from, and the workers read back from the environment), and how it opens.
 */
export interface TargetDescriptor<O extends object = object> {
  name: TargetName;
  summary: string;
  abilities: DescriptorAbilities;
  options: readonly TargetOption[];
  /** The target's own options from the environment its schema names (readOptions). */
  parse(env: NodeJS.ProcessEnv): O;
  /**
   * `hil run`: why these flag values make no run of this target (a usage error naming the flag), or
   * undefined; then the environment the workers need besides the options' own variables (computed once).
   */
  check?(o: O): string | undefined;
  prepare?(o: O): Promise<Record<string, string>>;
  open(options: O & FileOptions): Promise<Target>;
  /** Why this kind of target cannot provide the variant (a skip reason), or undefined. */
  cannotProvide(variant: VariantOptions, options: O): string | undefined;
  /** Start a variant without opening the file's target first (validated options). */
  openVariant(variant: VariantOptions, options: O): Promise<Target>;
  /**
   * The weld planner that goes with this kind of target (document 2), without opening the cell: a planner
   * is a service of its own, and a file of planner tests needs no cell stack. Undefined when the target
   * has none (the planner suites skip with a stated reason). The caller closes it.
   */
  openPlanner?(options: O): Promise<{ endpoint: PlannerEndpoint; close(): Promise<void> } | undefined>;
  /**
   * The offline programming server that goes with this kind of target (document 3): on the sim target the
   * reference server started with `spec` (its cells, planner and bounds; harness/targets/olp.ts), on the
   * external target the server at HIL_OLP_URL as its owner configured it (endpoint.configured false).
   * Undefined when the target has none (the OLP suites skip with a stated reason). The caller closes it.
   */
  openOlp?(spec: OlpSpec, options: O): Promise<OpenedOlp | undefined>;
  /**
   * A remote listener (document 1 part 5) someone else started, which the remote suites reach instead of
   * starting their own (harness/targets/remote.ts): where it is and the pair its credentials come from, or
   * why the run has none (a skip reason). Absent on a target that starts its own (testStacks) or has none.
   */
  remoteListener?(options: O): RemoteListener | string;
  /**
   * How to start someone else's service with flags of a test's choosing (the remote listener's start-up
   * checks, document 1 part 5 item 6): a shell command in which `{socket_dir}` (document 1's placeholder)
   * stands for a directory the test makes; or why the run has none. Absent on a target that starts the
   * reference stack itself, or none.
   */
  serviceCommand?(options: O): string | { why: string };
  /**
   * Why this kind of target cannot start a test's own stack (a skip reason), or undefined. Absent with
   * startStack when the target does not start the reference stack at all (external, rig).
   */
  cannotStartStack?(stack: TestStack, options: O): string | undefined;
  /**
   * Start a test's own stack: as it is on a plain run; on a recorded run (or the replay target) recorded
   * as (replayed from) the current test's next variant. The caller stops it; stopping ends its recording
   * or collects its replay verdict for the test.
   */
  startStack?(stack: TestStack, options: O): Promise<StackProcess>;
  /**
   * Its recorder, if any: the per-test fixture of a run whose every test gets stacks of its own (a recorded
   * run of the sim target: harness/targets/record.ts; the replay target: harness/targets/replay.ts), or
   * undefined on a run without (the fixture then does nothing).
   */
  perTest?(options: O): PerTestFixture | undefined;
  /**
   * `hil run` without file filters: the suite files (of `all`, paths under the root) a run of this target
   * can run anything of, when that is fewer than all (the replay target: the files the recordings hold; the
   * others' tests would all skip as not recorded, after their files' set-up ran for nothing). Undefined: all.
   */
  files?(options: O, all: readonly string[]): string[] | undefined;
  /**
   * What a test worker does for this target while vitest collects each file (harness/targets/warm-setup.ts,
   * after the file's nice value is taken): work the file's first tests would otherwise do inside their own
   * time. The replay target starts idle stack hosts for the per-test stacks. Undefined: nothing.
   */
  warmWorker?(options: O, env: NodeJS.ProcessEnv): void;
}

/** What a step of the stepped clock reports (the private test channel's /step). */
export interface StepReport {
  nowNs: bigint;
  cycles: bigint;
  /** Receipts, Home outcomes and stop outcomes the core sent during the step's cycles. */
  answered: number;
  /**
   * The answers the core owed when the step was done (a receipt not given yet, a Home under way); absent
   * when the target does not say. A request the core owes nothing for is answered without cycles, and
   * more steps would not change that (harness/clients/stepped.ts settle).
   */
  waiting?: number;
}

/** Someone else's remote listener (document 1 part 5) as a run reaches it (TargetDescriptor.remoteListener). */
export interface RemoteListener {
  /** Where it listens: https://{host}:{port} (document 1 part 1 {base_url}). */
  url: string;
  /**
   * The pair directory its credentials are files of (`hil certs create-pair`: ca.crt, server.crt,
   * server.key, crl.pem, pair.json): the suites issue and revoke clients with its CA key and rewrite its
   * CRL and server files, as document 1 part 5 items 4 and 5 have an operator do.
   */
  pairDir: string;
  /** The same service's control socket (its local transport, part 5 item 1). */
  socket: string;
  /** The link profile of the cell it serves (document 3 `control.link_profile`): its header read bound. */
  linkProfile: 'lan' | 'internet';
  /** The file its log is written to, when the run was told: the suites read the lines each refusal adds. */
  log?: string;
  /**
   * A file whose bytes it serves as a compiled resource (its cell's robot description, say), when the run
   * was told: GET /v1/resources/<the file's SHA-256> is judged against them.
   */
  resource?: string;
}

/** A reference stack started as a process (harness/targets/sim.ts startStack), once it is ready. */
export interface StackProcess {
  dir: string;
  ready: { control: string; public: string; test_channel: string; pid: number; driver?: string; clock?: string; remote?: string; machine_sha256?: string; configuration_sha256?: string };
  stderr: () => string;
  /** Stop the process; the temporary directory goes too unless keepDir (a restart reuses it). */
  stop(opts?: { keepDir?: boolean }): Promise<void>;
  /** Begin the orderly stop, as closing the stack's lifeline does, without waiting for it (a test of shutdown). */
  beginStop(): void;
}

/** How a reference stack is started. */
export interface StackStart {
  /** `hil serve` arguments after --socket-dir and --lifeline-stdin. */
  args: readonly string[];
  /** Extra environment, computed once the stack's directory exists (a variant's anchor store lives there). */
  env?: (dir: string) => Promise<Record<string, string>> | Record<string, string>;
  timeoutMs?: number;
  /** Reuse this socket directory (a service restart keeps sockets' directory and anchors). */
  reuseDir?: string;
  /**
   * Start it as a session of one of this worker's stack hosts (harness/targets/program-host.ts) rather than as
   * a process of its own: a replayed stack, one of many short ones. Its ready line's pid is the host's.
   */
  hosted?: boolean;
}

/** Where an OLP server answers. `url` is {olp_url}; routes are under {olp_url}/api/offline-programming/v1. */
export interface OlpEndpoint {
  url: string;
  /** The server's process id when the harness started it. */
  pid?: number;
  /** The harness started and configured it as the suite asked (else it is configured by its owner). */
  configured: boolean;
  /** The weld planner the harness started for it (or the facts file names), if any. */
  plannerUrl?: string;
  /** external: what its owner says of the deployment (harness/targets/olp-facts.ts). */
  facts?: OlpFacts;
  /** external: the deployment's server without catalogue, planner or workers (the facts file's bare_olp_url). */
  bare?: boolean;
  /** external: the deployment's server whose planner is the address the suite listens on (the facts file's own_planner). */
  ownPlanner?: boolean;
}

/** A cell of the catalogue the harness writes (the reference server's catalogue format). */
export interface OlpCellSpec {
  cell_id: string;
  model_id: string;
  robot_description_sha256?: string;
  mode?: string;
  backend?: string;
  pair_id?: string;
  configuration_sha256?: string;
  /** The control service: its Unix socket, or its remote listener with a client's PEM texts. */
  control: { socket: string } | { url: string; cert: string; key: string; ca: string };
  /** Planning calibration bytes of the cell. */
  calibration?: Uint8Array;
}

export interface OlpSpec {
  /** A catalogue with these cells (several targets, selection, fencing). */
  cells?: OlpCellSpec[];
  /** No catalogue: one target at this control socket (no selection, no fencing). */
  single?: { socket: string; model_id?: string; robot_description_sha256?: string };
  /** The planner: the harness's stub (default), none, or a URL. */
  planner?: 'stub' | 'none' | { url: string };
  /** The robot store: the fixture robots (default), a directory that does not exist, or a directory of the suite's. */
  robotStore?: 'fixture' | 'missing' | { dir: string };
  heartbeatMs?: number;
  leaseMs?: number;
  weldPlanTimeoutMs?: number;
  /**
   * The CAD (/cadquery/topology) and seam (/seam) workers: the reference server's own STEP worker
   * ("builtin") or a command (argv) of the suite's, e.g. a fault-injecting worker; pool size and time limit.
   */
  workers?: { cad?: 'builtin' | readonly string[]; seam?: 'builtin' | readonly string[]; pool?: number; timeoutMs?: number };
  /** Serve /local-simulator/* with the fixture nine-axis machine (internet link profile) and robot. */
  localSimulator?: boolean;
  /** The program catalogue's store: a fresh temporary directory (default), none, or a directory of the suite's. */
  programStore?: 'temp' | 'none' | { dir: string };
  /** Ask for the default listen address (127.0.0.1:8794) instead of a free port. */
  defaultListen?: boolean;
  /** Further Host names the server answers (--allowed-host). */
  allowedHosts?: readonly string[];
}

export interface OpenedOlp {
  endpoint: OlpEndpoint;
  stderr(): string;
  close(): Promise<void>;
}
