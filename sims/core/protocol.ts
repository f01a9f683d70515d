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
  | { mode: 'stepped' };

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
  /** Longest time an arm waits for the enabled axes to reach operation enabled (docs/profile.md). */
  armSettleNs?: bigint;
  /** Record the session at the bus boundary into this file (drivers/replay, docs/recording.md). */
  record?: { path: string; run?: string };
}

/** Native command reasons (CommandResult.Reason). 2, 5, 7, 8 are documented; the rest are profile. */
export const NATIVE_REASON = {
  none: 0,
  inhibited: 1,
  not_ready: 2,
  mode_conflict: 3,
  no_grant: 4,
  capacity: 5,
  wrong_generation: 6,
  pdo_mapping_mismatch: 7,
  outside_limits_outward: 8,
  unsupported: 9,
  invalid_axis_mask: 10,
  fault_persists: 11,
  io_not_configured: 12,
  io_readback_disagreement: 13,
  io_fast_input_unsatisfied: 14,
  io_exchange_lost: 15,
  homing_failed: 16,
  cancelled: 17,
} as const;

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

export type ToCore =
  | { t: 'cmd'; id: number; op: NativeOpName; generation: bigint; axisMask: number; label?: string }
  | { t: 'cancel_home' }
  | { t: 'grant'; generation: bigint; deadlineNs: bigint; active: boolean; axisMask: number }
  | { t: 'inject'; id: number; fault: FaultSpec | { kind: 'clear' } | { kind: 'stall_next_command'; ms: number } }
  /** Stepped clock only: run this many cycles back to back, then answer 'stepped'. */
  | { t: 'step'; id: number; cycles: number }
  | { t: 'shutdown' };

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
  timing: CoreTiming;
  /** The bus driver: registry name, lifecycle state, bus submission failures, the failure that stopped it. */
  driver: DriverStatus;
  /** How this incarnation's cycles are timed and the scheduling it obtained. */
  clock: { mode: ClockSpec['mode']; scheduling: string };
  /** Opaque drive state to hand to the next incarnation (drivers with a DrivePersistence facet). */
  driver_state?: unknown;
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
      /** The incarnation's telemetry capture ring (sims/core/capture.ts CaptureReader reads it); absent without capture. */
      capture?: SharedArrayBuffer;
    }
  | { t: 'reply'; id: number; result: CommandResult; detail?: string; extra?: Record<string, unknown> }
  | { t: 'home_done'; sequence: bigint; ok: boolean; detail: string; reason: number }
  | { t: 'status'; status: CoreStatus }
  | { t: 'stop_drained'; sequence: bigint }
  | { t: 'event'; type: string; payload: Record<string, unknown> }
  | { t: 'stepped'; id: number; nowNs: bigint; cycles: bigint }
  /** The core cannot go on; `message` says why (the service logs it before the exit is handled). */
  | { t: 'fatal'; message: string };
