// CiA 402 (DS402) drive profile constants shared by the core's drive handling and the simulated drives,
// so that the two cannot drift apart (the KickCAT habit in DESIGN.md).

/** Drive state machine states, decoded from the statusword. Numeric values are ours (profile). */
export const enum Ds402State {
  NotReadyToSwitchOn = 0,
  SwitchOnDisabled = 1,
  ReadyToSwitchOn = 2,
  SwitchedOn = 3,
  OperationEnabled = 4,
  QuickStopActive = 5,
  FaultReactionActive = 6,
  Fault = 7,
}

export const DS402_STATE_NAMES = [
  'not_ready_to_switch_on',
  'switch_on_disabled',
  'ready_to_switch_on',
  'switched_on',
  'operation_enabled',
  'quick_stop_active',
  'fault_reaction_active',
  'fault',
] as const;

/** Statusword bits (object 0x6041). */
export const SW = {
  readyToSwitchOn: 1 << 0,
  switchedOn: 1 << 1,
  operationEnabled: 1 << 2,
  fault: 1 << 3,
  voltageEnabled: 1 << 4,
  quickStop: 1 << 5,
  switchOnDisabled: 1 << 6,
  warning: 1 << 7,
  remote: 1 << 9,
  targetReached: 1 << 10,
  internalLimit: 1 << 11,
  /** CSP: target value ignored / drive follows; homing mode: homing attained. */
  opMode12: 1 << 12,
  /** CSP: following error; homing mode: homing error. */
  opMode13: 1 << 13,
} as const;

/** Statusword mask/value pairs identifying each state (CiA 402 table). */
const STATE_PATTERNS: Array<[number, number, Ds402State]> = [
  [0x4f, 0x00, Ds402State.NotReadyToSwitchOn],
  [0x4f, 0x40, Ds402State.SwitchOnDisabled],
  [0x6f, 0x21, Ds402State.ReadyToSwitchOn],
  [0x6f, 0x23, Ds402State.SwitchedOn],
  [0x6f, 0x27, Ds402State.OperationEnabled],
  [0x6f, 0x07, Ds402State.QuickStopActive],
  [0x4f, 0x0f, Ds402State.FaultReactionActive],
  [0x4f, 0x08, Ds402State.Fault],
];

export function decodeStatusword(sw: number): Ds402State {
  for (const [mask, value, state] of STATE_PATTERNS) if ((sw & mask) === value) return state;
  return Ds402State.NotReadyToSwitchOn;
}

/** The statusword state bits a drive reports in each state (other bits are added by the drive). */
export const STATE_BITS: Record<Ds402State, number> = {
  [Ds402State.NotReadyToSwitchOn]: 0x00,
  [Ds402State.SwitchOnDisabled]: 0x40,
  [Ds402State.ReadyToSwitchOn]: 0x21,
  [Ds402State.SwitchedOn]: 0x23,
  [Ds402State.OperationEnabled]: 0x27,
  [Ds402State.QuickStopActive]: 0x07,
  [Ds402State.FaultReactionActive]: 0x0f,
  [Ds402State.Fault]: 0x08,
};

/** Controlword commands (object 0x6040): mask and value. */
export const CW = {
  shutdown: 0x0006,
  switchOn: 0x0007,
  enableOperation: 0x000f,
  disableVoltage: 0x0000,
  quickStop: 0x0002,
  disableOperation: 0x0007,
  faultReset: 0x0080,
  /** Homing mode: start homing (bit 4). */
  homingStart: 0x0010,
  halt: 0x0100,
} as const;

export type Ds402Command =
  | 'shutdown'
  | 'switch_on'
  | 'enable_operation'
  | 'disable_voltage'
  | 'quick_stop'
  | 'disable_operation'
  | 'fault_reset'
  | 'none';

/** Decode the controlword command per the CiA 402 device control table. */
export function decodeControlword(cw: number, previousCw: number): Ds402Command {
  if ((cw & 0x80) !== 0 && (previousCw & 0x80) === 0) return 'fault_reset';
  if ((cw & 0x02) === 0) return 'disable_voltage';
  if ((cw & 0x06) === 0x02) return 'quick_stop';
  if ((cw & 0x87) === 0x06) return 'shutdown';
  if ((cw & 0x8f) === 0x07) return 'switch_on'; // also disable_operation from operation_enabled
  if ((cw & 0x8f) === 0x0f) return 'enable_operation';
  return 'none';
}

/**
 * The controlword that moves a drive one step toward enabled (or away from it): the master's side of the
 * table the simulated drives read with decodeControlword, so the two cannot drift (DESIGN.md, KickCAT).
 */
export function controlwordFor(state: Ds402State, wantEnabled: boolean): number {
  if (state === Ds402State.Fault) return CW.disableVoltage;
  if (!wantEnabled) return state === Ds402State.OperationEnabled ? CW.quickStop : CW.disableVoltage;
  switch (state) {
    case Ds402State.SwitchOnDisabled:
      return CW.shutdown;
    case Ds402State.ReadyToSwitchOn:
      return CW.switchOn;
    case Ds402State.SwitchedOn:
    case Ds402State.OperationEnabled:
      return CW.enableOperation;
    default:
      return CW.disableVoltage;
  }
}

/** Modes of operation (object 0x6060). */
export const MODE = {
  homing: 6,
  cyclicSyncPosition: 8,
} as const;
