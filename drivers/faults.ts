// One fault vocabulary for every driver. A driver that can inject faults (the simulator) accepts these
// names; a driver that can only observe them (replay, the rig) reports the same names when it sees the
// condition, so a test, a recording and a rig log speak of the same thing. Injection is out of band, never
// through the process image (the KickCAT habit in DESIGN.md).

/** Every fault a driver may inject or report, with what it means on the bus. */
export const FAULT_KINDS = {
  following_error: 'the drive trips on its own following error (error code 0x8611) once enabled',
  drive_fault: 'the drive latches a fault with the given CiA 402 error code',
  frozen_feedback: 'the drive stops refreshing its inputs (stale PDO)',
  slave_offline: 'the slave drops off the bus',
  wkc_drop: 'the working counter comes back one short every cycle',
  estop_open: 'the safety (E-stop) chain opens and removes drive power',
  absolute_disagree: 'the absolute encoder disagrees with the incremental count by the given counts',
  io_readback_disagree: 'an output readback bit disagrees with the commanded output',
  fast_input_unsatisfied: 'a fast input reads unsatisfied',
  pdo_mapping_mismatch: 'the drive PDO mapping differs from the expected one (seen at the next bus start)',
  homing_fails: 'the drive reports a homing error instead of homing attained',
  sluggish_drive: 'the drive follows its position target far more slowly than tuned (a soft loop): it lags a moving target',
} as const;

export type FaultKind = keyof typeof FAULT_KINDS;

export type FaultSpec =
  | { kind: 'following_error'; axis: number }
  | { kind: 'drive_fault'; axis: number; errorCode: number }
  | { kind: 'frozen_feedback'; axis: number }
  | { kind: 'slave_offline'; axis: number }
  | { kind: 'wkc_drop' }
  | { kind: 'estop_open' }
  | { kind: 'absolute_disagree'; axis: number; counts: number }
  | { kind: 'io_readback_disagree'; bit: number }
  | { kind: 'fast_input_unsatisfied'; bit: number }
  | { kind: 'pdo_mapping_mismatch'; axis: number }
  | { kind: 'homing_fails'; axis: number }
  | { kind: 'sluggish_drive'; axis: number };

/** Stable codes of fault-injection refusals (the caller's mistake, not a driver defect). */
export class FaultSpecError extends Error {
  constructor(
    readonly code: 'FAULT_UNKNOWN_KIND' | 'FAULT_BAD_FIELD' | 'FAULT_NO_SUCH_AXIS' | 'FAULT_NOT_SUPPORTED',
    message: string,
  ) {
    super(message);
    this.name = 'FaultSpecError';
  }
}

const FIELDS: Record<FaultKind, readonly string[]> = {
  following_error: ['axis'],
  drive_fault: ['axis', 'errorCode'],
  frozen_feedback: ['axis'],
  slave_offline: ['axis'],
  wkc_drop: [],
  estop_open: [],
  absolute_disagree: ['axis', 'counts'],
  io_readback_disagree: ['bit'],
  fast_input_unsatisfied: ['bit'],
  pdo_mapping_mismatch: ['axis'],
  homing_fails: ['axis'],
  sluggish_drive: ['axis'],
};

/** Checks an untrusted value (it arrives as JSON over the test channel) against the vocabulary. */
export function parseFaultSpec(v: unknown): FaultSpec {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new FaultSpecError('FAULT_BAD_FIELD', 'a fault is an object with a kind');
  const o = v as Record<string, unknown>;
  const kind = o.kind;
  if (typeof kind !== 'string' || !Object.hasOwn(FAULT_KINDS, kind)) {
    throw new FaultSpecError('FAULT_UNKNOWN_KIND', `unknown fault kind ${JSON.stringify(kind)}; known: ${Object.keys(FAULT_KINDS).join(', ')}`);
  }
  const fields = FIELDS[kind as FaultKind];
  for (const k of Object.keys(o)) {
    if (k !== 'kind' && !fields.includes(k)) throw new FaultSpecError('FAULT_BAD_FIELD', `${kind}: unexpected field ${k}`);
  }
  for (const f of fields) {
    const x = o[f];
    const ok = f === 'counts' ? Number.isSafeInteger(x) : Number.isSafeInteger(x) && (x as number) >= 0 && (f !== 'errorCode' || (x as number) <= 0xffff) && (f !== 'bit' || (x as number) < 16);
    if (!ok) throw new FaultSpecError('FAULT_BAD_FIELD', `${kind}: field ${f} must be ${f === 'counts' ? 'an integer' : f === 'bit' ? 'an integer 0..15' : f === 'errorCode' ? 'an integer 0..65535' : 'a non-negative integer'}`);
  }
  return o as unknown as FaultSpec;
}

/** Optional facet: a driver that can inject faults out of band. */
export interface FaultInjection {
  /** The kinds this driver can inject (a subset of FAULT_KINDS). */
  readonly kinds: readonly FaultKind[];
  /** Throws FaultSpecError for a kind it cannot inject or an axis it does not have. */
  inject(fault: FaultSpec): void;
  /** Remove every injected condition (latched drive faults stay latched until a fault reset). */
  clear(): void;
}

/**
 * Optional facet: drive state a driver carries across a core restart. Real drives keep their counters when
 * the master restarts; a simulator has to be handed them. The snapshot is opaque to everyone but the
 * driver that made it (it travels through the service as a structured clone) and is given back through
 * DriverOptions.persisted.
 */
export interface DrivePersistence {
  snapshot(): unknown;
}
