// The private channel between the service and the real-time core (document 1 part 1: "a private channel
// to the real-time core sits behind it and is not part of this interface"). Messages are structured
// clones over a MessagePort; bigints travel as bigints.

import type { CompiledMachine } from '../config/types.ts';
import type { SimFault } from '../../drivers/sim/driver.ts';
import type { FaultRecovery } from './faults.ts';

export interface CoreStartOptions {
  machine: CompiledMachine;
  driver: 'sim' | 'replay' | 'ethercat';
  /** Spin this many ns before each deadline for precise wake-up (0: sleep only). */
  spinNs: number;
  /** Run faster than real time by this factor (1 = real time). Stepped mode: 0. */
  speed: number;
  /**
   * Telemetry capture retention in ms: the worker sizes the capture ring from it and cycle_ns. Default
   * the machine's runtime.telemetry.retention_ms; 0 disables capture (no ring in 'ready').
   */
  captureRetentionMs?: number;
  /** Sim driver options (persisted: drive state handed over from the previous core incarnation). */
  sim?: {
    initialPositions?: number[];
    homingNs?: bigint;
    persisted?: { counts: number[]; absoluteBias: number[] };
    /** Faults present when the bus comes up (drives whose PDO mapping differs). */
    startFaults?: Array<{ kind: 'pdo_mapping_mismatch'; axis: number }>;
  };
}

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
  | { t: 'inject'; id: number; fault: SimFault | { kind: 'clear' } | { kind: 'stall_next_command'; ms: number } }
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
  /** Sim driver only: drive state to hand to the next incarnation. */
  sim_persist?: { counts: number[]; absoluteBias: number[] };
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
  | { t: 'fatal'; message: string };
