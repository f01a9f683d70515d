// What the rest of the reference stack reads from a compiled machine configuration (document 3 part 2).
// The compiler (sims/config/compile.ts) produces it; the service and the core consume only this view.

export type LinkProfile = 'lan' | 'internet';

export interface CompiledAxis {
  /** Axis index in configured order (bit index of axis_mask). */
  index: number;
  /** Canonical joint id reported by Describe (`name` of a flat axis, `robot_joint` of a robot-bound one). */
  id: string;
  type: 'rotary' | 'linear';
  /** rad for rotary, m for linear. */
  position_unit: 'rad' | 'm';
  slave_position: number;
  min_position: number;
  max_position: number;
  max_velocity: number;
  /** Present when the axis declares a maximum acceleration. */
  max_acceleration?: number;
  jog_acceleration: number;
  following_error: number;
  following_error_timeout_ms: number;
  completion_tolerance: number;
  completion_timeout_ms: number;
  max_target_lead: number;
  /** Whether the axis supports native (drive) homing; see docs/profile.md. */
  native_home: boolean;
  require_home: boolean;
  /** Drive counts per position unit (always positive). */
  counts_per_unit: number;
  /** Command direction: +1 or -1. logical = sign * counts / counts_per_unit. */
  sign: 1 | -1;
  coordinate_evidence_mode: 'multi_turn' | 'single_turn_absolute';
  jog_arrest_ns: bigint;
  jog_quick_stop_ns: bigint;
  // Added by the compiler (profile fields, docs/profile.md); optional so hand-built views stay valid.
  position_tracking_mode?: 'bounded' | 'continuous';
  /** Resolved drive profile (the drive layer). */
  drive?: { profile: string; vendor_id: number; product_code: number; dc_quantum_ns: bigint };
  /** DS402 homing method (0x6098) and the axis position at the home point. */
  home_method?: number;
  home_offset?: number;
  brake?: { present: boolean; release_delay_ms: number; engage_delay_ms: number };
  collision_watchdog?: { enabled: boolean; torque_permille: number; torque_cycles: number; following_error_cycles: number };
  diagnostics_extended?: boolean;
  /** sha256 of the axis's coordinate identity (coordinate.identity.json); anchors must match it. */
  coordinate_sha256?: string;
}

export interface CompiledMachine {
  /** Absolute path of the compiled directory (named by configuration_sha256 hex). */
  dir: string;
  configuration_sha256: string; // 64 lowercase hex, no prefix
  machine_sha256: string;
  deployment_sha256: string;
  backend: 'simulation' | 'live';
  cycle_ns: bigint;
  max_cycle_lateness_ns: bigint;
  axes: CompiledAxis[];
  control: {
    link_profile: LinkProfile;
    max_grant_lease_ns: bigint;
    max_jog_input_age_ns: bigint;
  };
  runtime: {
    cpu: number;
    priority: number;
    telemetry: { retention_ms: number; dump_count: number; dump_bytes: number; directory?: string };
  };
  /** Cell I/O outputs in configured order (empty when there is no io block). */
  io: { outputs: Array<{ name: string; torch: boolean }>; inputs: Array<{ name: string; fast: boolean }> } | null;
  // Added by the compiler; optional so hand-built views stay valid.
  /** null on machines with robot-bound axes (where the field is forbidden). */
  drive_speed_limit_motor_rpm?: number | null;
  /** Digest of configuration.base.identity (configuration without the io block); null without io. */
  configuration_base_sha256?: string | null;
  robot?: { model_id: string; description_sha256: string | null } | null;
  /** The bus layer for a bus driver (document 3 bus, bus_bringup, io.slave_position); added by the compiler. */
  bus?: {
    io_slave_position: number | null;
    unused_slaves: number[];
    bringup: { explicit_pdo_config: boolean; disable_output_watchdog: boolean; no_dc: boolean; safeop_op_timeout_ms: number };
  };
}
