// The private channel between the service and the real-time core (document 1 part 1: "a private channel
// to the real-time core sits behind it and is not part of this interface"). Messages are structured
// clones over a MessagePort; bigints travel as bigints.

import type { CompiledMachine } from '../config/types.ts';
import type { FaultSpec } from '../../drivers/faults.ts';
import type { FaultRecovery } from './faults.ts';

/** How the core's cycles are timed (sims/core/clock.ts). */
export type ClockSpec =
  | { mode: 'realtime'; spinNs: number }
  /** Simulated time advances one cycle_ns per cycle while the wall sleeps cycle_ns / speed. */
  | { mode: 'fast'; speed: number }
  /** No cycle runs until the host asks for steps (ToCore 'step'); simulated time, no sleeping. */
  | { mode: 'stepped' }
  /**
   * Paced replay (sims/replay/pacer.ts): each cycle's time is the recorded frame's time; cycles run back
   * to back up to the cycle of the next recorded request, which waits for the live one.
   */
  | {
      mode: 'recorded';
      /**
       * The recording was made on the stepped clock (format 3): cycles run only while a step the test asked
       * for is under way, so the clock is reported as 'stepped' (Describe, Status), which is how it behaves.
       */
      steps?: boolean;
    };

/** The clock mode the cell reports (Describe, Status): a paced replay of a stepped recording is stepped. */
export function reportedClockMode(spec: ClockSpec): ClockSpec['mode'] {
  return spec.mode === 'recorded' && spec.steps ? 'stepped' : spec.mode;
}

/** Scheduling priority the core thread asks for (real-time clock only). */
export type PriorityRequest = 'auto' | 'rt' | 'nice' | 'none';

export interface CoreStartOptions {
  machine: CompiledMachine;
  /** Bus driver registry name (drivers/index.ts). */
  driver: string;
  /** The driver's own parameters, validated by the driver's factory. */
  driverParams?: Record<string, unknown>;
  /** Drive state handed over from the previous incarnation (the driver's DrivePersistence snapshot). */
  driverState?: unknown;
  clock: ClockSpec;
  /** Default 'auto': SCHED_FIFO where permitted, else a raised nice value, else nothing. */
  priority?: PriorityRequest;
  /**
   * Telemetry capture retention in ms: the worker sizes the capture ring from it and cycle_ns. Default
   * the machine's runtime.telemetry.retention_ms; 0 disables capture (no ring in 'ready').
   */
  captureRetentionMs?: number;
  /**
   * A capture ring buffer of an incarnation that is over, which its service no longer reads: the new ring
   * is written into it when the layout is the same (capture/ring.ts CaptureRingOptions.reuse).
   */
  captureReuse?: SharedArrayBuffer;
  /** Longest time an arm waits for the enabled axes to reach operation enabled (docs/profile.md). */
  armSettleNs?: bigint;
  /**
   * Plan memory shared with the service (sims/core/plan-arena.ts); default on, except on the 'recorded'
   * clock. false: every plan reaches the core as transferred arrays, as before the arena.
   */
  planArena?: boolean;
  /** Record the session at the bus boundary into this file (drivers/replay, docs/recording.md). */
  record?: { path: string; run?: string };
  /**
   * Paced replay (clock 'recorded', driver replay): live requests are matched with the recorded ones and
   * the verdict is written to this file (sims/replay/pacer.ts, docs/recording.md "The replay target").
   */
  replayPace?: {
    verdictFile: string;
    /** Recorded time per wall time (1: as recorded); absent: flat out. */
    speed?: number;
    /** Paced at `speed` only while the recorded test had a stream open, flat out elsewhere (`--replay-speed auto`). */
    watched?: boolean;
  };
}

// The numeric reasons (native, jog) and their labels: sims/core/reasons.ts.

/** JogObservation.Mode: 0 none, 1 independent (begin_jog), 2 legacy (jog, test_only). */
export const JOG_MODE = { none: 0, independent: 1, legacy: 2 } as const;

/** Native command codes (CommandResult.Operation). Numeric values are a profile decision. */
export const NATIVE_OP = {
  stop: 1,
  enable: 2,
  arm: 3,
  home: 4,
  halt: 5,
  reset_fault: 6,
  io_arm: 7,
  io_disarm: 8,
  mark: 9,
  restore_anchor: 10,
  grant: 11,
  recovery_status: 12,
  prepare: 13,
  start: 14,
  discard: 15,
  begin_jog: 16,
  end_jog: 17,
  jog: 18,
} as const;
export type NativeOpName = keyof typeof NATIVE_OP;

export interface CommandResult {
  Sequence: bigint;
  Handle: bigint;
  Generation: bigint;
  Operation: number;
  /** 0 accepted, 1 rejected, 2 prepared */
  Result: number;
  Reason: number;
  AxisMask: number;
}

/**
 * What travels beside a prepare but is no part of the request (never recorded: a recording keeps the arrays'
 * contents, and a replay builds from them): memory for the plan (PlanWorkspace), and the plan arena slot its
 * arrays and workspace are views of (sims/core/plan-arena.ts), which the core holds until it lets the plan go.
 */
export interface PlanAttachment {
  workspace?: PlanWorkspace;
  slot?: number;
}

/**
 * Output arrays for the plan a large prepare carries, allocated and written once by the sender (the upload
 * worker, the program route) and transferred with it, so the core writes the plan into memory the process
 * has already faulted in. A 250000-point plan is 36 MB of counts and count rates: faulted in by the core
 * thread, one first-touch page fault per 4 KiB, they made every cycle of the build late by up to 1.5 ms and
 * the core 11 ms behind at the first upload of a stack (bench/upload-impact.bench.ts).
 * Allocating them itself also cost the core a garbage collection in the cycle the plan arrived (1.5 to
 * 1.8 ms: V8 collects when an isolate's external memory grows). The core allocates its own arrays when
 * these are absent or of another size, so a replay (which strips them) builds the same plan in the same
 * cycles.
 * For a large plan they are views of a plan arena slot (plan-arena.ts, PlanAttachment `slot`), written once
 * per slot.
 */
export interface PlanWorkspace {
  /** count long. */
  t: Float64Array;
  /** count x axes long. */
  q: Float64Array;
  qd: Float64Array;
}

/**
 * A point list as the service hands it to the core (struct of arrays, transferred, never copied): the
 * one declaration of the plan's arrays; the upload decoder fills them (sims/service/upload/decoder.ts
 * PointArrays adds its counts) and the core's trajectory lane converts them (trajectory.ts PlanInput).
 */
export interface PlanArrays {
  timeNs: BigInt64Array;
  /** count*axes, row-major. */
  position: Float64Array;
  /** count*axes, NaN rows where the point has no velocity (absent or empty); or empty when no point has one. */
  velocity: Float64Array;
  hasVelocity: Uint8Array;
  ioMask: Uint32Array;
  ioValues: Uint32Array;
}

export type ToCore =
  | { t: 'cmd'; id: number; op: NativeOpName; generation: bigint; axisMask: number; label?: string; handle?: bigint; jog?: JogCmd }
  /** One admitted jog input (jog.sock frame) for the current jog generation; refusals come back as a 'native_jog_update' event. */
  | { t: 'jog_update'; generation: bigint; jogGeneration: bigint; sequence: bigint; captureNs: bigint; inputDeadlineNs: bigint; velocity: number[] }
  /** A checked point list for the trajectory lane (typed arrays, transferred). Answered Result 2 prepared. */
  | ({
      t: 'prepare';
      id: number;
      generation: bigint;
      handle: bigint;
      axisMask: number;
      /** A program (docs/profile.md "Program admission"): an axis may start outside its limits and move back, never further out. */
      recovery?: boolean;
    } & PlanArrays)
  | { t: 'cancel_home' }
  /** `stopping`: the grant went inactive because a stop was admitted (the lanes end with reason "stop"). */
  | { t: 'grant'; generation: bigint; deadlineNs: bigint; active: boolean; axisMask: number; stopping?: boolean }
  | { t: 'inject'; id: number; fault: FaultSpec | { kind: 'clear' } | { kind: 'stall_next_command'; ms: number } | { kind: 'hold_capture_write'; ms: number } | { kind: 'hold_event_publisher'; ms: number } | { kind: 'late_wake'; ns: number } }
  /** Stepped clock only: run this many cycles back to back, then answer 'stepped'. */
  | { t: 'step'; id: number; cycles: number }
  | { t: 'shutdown' };

/** Jog fields of a native command: begin_jog (origin, deadline) and legacy jog (velocity, timeout). */
export interface JogCmd {
  originNs?: bigint;
  deadlineNs?: bigint;
  /** logical units per second, described axis order */
  velocity?: number[];
  timeoutNs?: bigint;
}

/** The jog lane as the core publishes it (JogObservation is built from it; docs/profile.md "Jog"). */
export interface JogStatus {
  JogGeneration: bigint;
  Mode: number;
  SessionOpen: number;
  HasInput: number;
  Ramping: number;
  Active: number;
  AxisMask: number;
  LimitedAxisMask: number;
  SourceSequence: bigint;
  SourceOriginHostNs: bigint;
  DeadlineHostNs: bigint;
  InputDeadlineHostNs: bigint;
  StateReason: number;
  ControlReason: number;
  UpdateReason: number;
  CommandedVelocity: number[];
  TargetVelocity: number[];
}

export interface AxisStatus {
  index: number;
  id: string;
  ds402_state: string;
  statusword: number;
  enabled: boolean;
  ready: boolean;
  fault: boolean;
  error_code: number;
  position: number;
  velocity: number;
  following_error: number;
  pdo_fresh: boolean;
  online: boolean;
  brake_engaged: boolean;
  /** Raw drive counts (incremental) and the absolute encoder reading. */
  position_counts: number;
  absolute_counts: number;
  absolute_valid: boolean;
}

/**
 * Cycle timing of the current core incarnation, cumulative since it started. Lateness is wake minus
 * scheduled time; work is the time spent inside the cycle (exchange, logic, status publication, capture).
 * Percentiles come from a fixed log-spaced histogram (20 buckets per decade, 1 us to 100 ms): each is the
 * upper edge of its bucket clamped to the observed range, so at most about 12 % high. All in ns.
 */
export interface CoreTiming {
  cycles: bigint;
  /** Cycles whose lateness exceeded the machine's max_cycle_lateness_ns. */
  overruns: bigint;
  p50_lateness_ns: bigint;
  p99_lateness_ns: bigint;
  max_lateness_ns: bigint;
  p50_work_ns: bigint;
  p99_work_ns: bigint;
  max_work_ns: bigint;
}

export interface CoreStatus {
  incarnation: string;
  cycle: bigint;
  now_ns: bigint;
  armed: boolean;
  enable_mask: number;
  home_valid_mask: number;
  safety_fault_mask: number;
  home_epoch: bigint;
  execution_fault_reasons: number;
  commissioning_phase: string;
  stop_draining: boolean;
  io_armed: boolean;
  io_output_word: number;
  io_input_word: number;
  wkc_actual: number;
  wkc_expected: number;
  axes: AxisStatus[];
  /** Latched execution fault bits with their axis masks. */
  faults: FaultRecovery[];
  last_reset_sequence: bigint;
  /** The native grant receipt (document 1 part 2 GrantObservation; case-sensitive names). */
  grant_observation: Record<string, bigint | number | number[]>;
  homing_mask: number;
  halted: boolean;
  /** MotionState (document 1 part 2). */
  motion: MotionStatus;
  /** PlanCursor (document 1 part 2). */
  plan_cursor: { time_ns: bigint; active_handle: bigint; sample_index: number; native_clock_ns: bigint };
  /** The handle of the plan waiting in the core's plan slot (0 when none). */
  prepared_handle: bigint;
  timing: CoreTiming;
  /** The jog lane (document 1 part 2 JogObservation; fields in docs/profile.md "Jog"). */
  jog: JogStatus;
  /** The bus driver: registry name, lifecycle state, bus submission failures, the failure that stopped it. */
  driver: DriverStatus;
  /** How this incarnation's cycles are timed and the scheduling it obtained. */
  clock: { mode: ClockSpec['mode']; scheduling: string };
  /** Opaque drive state to hand to the next incarnation (drivers with a DrivePersistence facet). */
  driver_state?: unknown;
}

/** MotionState: mode 0 idle, 2 trajectory, 3 jog; state 0 idle 1 accepted 2 queued 3 executing 4 completed 5 aborted 6 faulted 7 underrun. */
export interface MotionStatus {
  mode: number;
  state: number;
  trajectory_id: bigint;
  point_index: number;
  queue_depth: number;
  last_event: number;
  done: boolean;
  command_sequence: bigint;
  time_ns: bigint;
}

export interface DriverStatus {
  name: string;
  state: 'unconfigured' | 'opened' | 'active' | 'errored' | 'closed';
  submission_failures: number;
  last_return_code: number;
  failure?: { hook: string; message: string };
}

export type FromCore =
  | {
      t: 'ready';
      incarnation: string;
      nowNs: bigint;
      startupNotes: string[];
      mappingMismatchMask: number;
      /** The incarnation's telemetry capture ring (sims/core/capture/reader.ts CaptureReader reads it); absent without capture. */
      capture?: SharedArrayBuffer;
      /** The incarnation's plan arena (sims/core/plan-arena.ts PlanArena.attach); absent on a paced replay. */
      planArena?: SharedArrayBuffer;
    }
  | { t: 'reply'; id: number; result: CommandResult; detail?: string; extra?: Record<string, unknown> }
  | { t: 'home_done'; sequence: bigint; ok: boolean; detail: string; reason: number }
  | { t: 'status'; status: CoreStatus }
  | { t: 'stop_drained'; sequence: bigint }
  /** `time_ns`: the core's clock in the cycle that published it (stamped by Core's send, not by each call site). */
  | { t: 'event'; type: string; payload: Record<string, unknown>; time_ns?: bigint }
  /** `answered`: replies, Home and stop outcomes the step's cycles produced. */
  | { t: 'stepped'; id: number; nowNs: bigint; cycles: bigint; answered: number; owed?: number }
  /** The core cannot go on; `message` says why (the service logs it before the exit is handled). */
  | { t: 'fatal'; message: string };

/**
 * What a kept core thread (sims/service/core-threads.ts) says on its parent port when its incarnation has
 * ended cleanly and it waits for the next one (sims/core/worker.ts).
 */
export const INCARNATION_OVER = 'incarnation_over';
/** That message: `normalScheduling` false when the thread still holds a raised priority (it then serves only the same request). */
export interface IncarnationOver {
  t: typeof INCARNATION_OVER;
  normalScheduling: boolean;
}

/**
 * The core's messages a recording numbers among its outputs, in the order sent (drivers/replay recorder notes
 * them; a replay compares them one by one), and the ones the service builds its own state from: replies,
 * events, Home and stop outcomes.
 */
/**
 * A status snapshot as the cycling loop's thread sends it (sims/core/worker.ts): the CoreStatus in V8's
 * serialization format (node:v8 serialize), with its now_ns beside it. The service gets some hundred a
 * second per core and reads few of them (a request's view, a wait): it takes the bytes apart only when
 * the status is read (sims/service/core-link.ts status), where a structured message was deserialized on
 * arrival every time. The same values as the { t: 'status' } message it stands for.
 */
export interface PackedStatus {
  t: 'status_packed';
  bytes: Uint8Array;
  now_ns: bigint;
}

export function isOutput(m: { t?: string }): boolean {
  return m.t === 'reply' || m.t === 'event' || m.t === 'home_done' || m.t === 'stop_drained';
}
