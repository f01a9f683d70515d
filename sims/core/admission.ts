// Native command admission as one table: for each operation, the checks that must pass, in order, each
// naming the native reason it refuses with. The first failing check answers; a command that passes every
// check is carried out by the core (core.ts). Reading the table is reading the core's preconditions.
//
// The fence holds in the core too (document 1 part 2 "Fence"): a fenced command is
// admitted only while the grant the service last told the core about is active, carries exactly its
// generation, and its lease deadline (host monotonic ns) has not passed. Stop is never refused: it only
// ever makes the cell safer, and it must inhibit even at the last generation.

import type { ProcessImage } from '../../drivers/bus.ts';
import type { CompiledMachine } from '../config/types.ts';
import { FAULT } from './faults.ts';
import type { FaultMonitor } from './fault-monitor.ts';
import { JOG_MODE, type NativeOpName, type ToCore } from './protocol.ts';
import { jogSessionStale, NATIVE_REASON } from './reasons.ts';
import type { Plan } from './trajectory.ts';

export type Cmd = Extract<ToCore, { t: 'cmd' }>;

export interface GrantView {
  generation: bigint;
  deadlineNs: bigint;
  active: boolean;
}

/** What the checks may read of the core. */
export interface AdmissionView {
  readonly machine: CompiledMachine;
  readonly image: ProcessImage;
  readonly all: number;
  readonly faults: FaultMonitor;
  readonly grant: GrantView;
  readonly homeValidMask: number;
  readonly homingMask: number;
  readonly stopDraining: boolean;
  readonly armed: boolean;
  /** Axes the core wants enabled. */
  readonly enableMask: number;
  /** Axes whose drive reports operation enabled. */
  enabledMask(): number;
  /** Axes of `mask` owned by a motion lane other than hold (and other than the lane named `except`). */
  laneConflicts(mask: number, except?: string): number;
  /** Host monotonic ns now (the lease deadline's time base, whatever clock the cycle runs on). */
  hostNow(): bigint;
  /** The plan in the core's plan slot, if any. */
  readonly preparedPlan: Plan | null;
  readonly ioArmed: boolean;
  /** The jog lane: the open generation and its mode (jog.ts JOG_MODE). */
  readonly jog: { readonly open: boolean; readonly generation: bigint; readonly mode: number };
  /** Axes of `mask` whose target differs from where a new trajectory starts by more than the tolerance. */
  startMismatch(plan: Plan): number;
}

export interface Refusal {
  reason: number;
  mask: number;
  detail: string;
}

type Check = (v: AdmissionView, m: Cmd, mask: number) => Refusal | null;

const refuse = (reason: number, mask: number, detail: string): Refusal => ({ reason, mask, detail });

// ---- the checks ----

const fenced: Check = (v, m, mask) => {
  if (!v.grant.active) return refuse(NATIVE_REASON.no_grant, mask, 'no current grant');
  if (m.generation !== v.grant.generation) return refuse(NATIVE_REASON.wrong_generation, mask, `generation ${m.generation} is not the current ${v.grant.generation}`);
  if (v.hostNow() > v.grant.deadlineNs) return refuse(NATIVE_REASON.no_grant, mask, 'lease expired');
  return null;
};
const inGroup: Check = (v, _m, mask) => ((mask & ~v.all) !== 0 ? refuse(NATIVE_REASON.invalid_axis_mask, mask, 'axis_mask outside the configured axes') : null);
const nonzeroInGroup: Check = (v, _m, mask) =>
  mask === 0 || (mask & ~v.all) !== 0 ? refuse(NATIVE_REASON.invalid_axis_mask, mask, 'axis_mask must select configured axes') : null;
const safetyClosed: Check = (v, _m, mask) => (v.faults.safetyFaultMask ? refuse(NATIVE_REASON.inhibited, mask, 'safety chain open') : null);
/** enable with mask 0 (disable everything) is allowed with the chain open. */
const safetyClosedIfEnabling: Check = (v, m, mask) => (mask !== 0 ? safetyClosed(v, m, mask) : null);
const noRestartRequired: Check = (v, _m, mask) => {
  const r = mask & (v.faults.latched.get(FAULT.restart_required!) ?? 0);
  return r ? refuse(NATIVE_REASON.pdo_mapping_mismatch, r, 'PDO mapping differs or the bus failed: restart required') : null;
};
const noFaultsOnMask: Check = (v, _m, mask) => (mask & v.faults.axisMask ? refuse(NATIVE_REASON.not_ready, mask, 'latched faults on selected axes') : null);
const noFaults: Check = (v) => (v.faults.size ? refuse(NATIVE_REASON.not_ready, v.faults.axisMask, 'latched faults') : null);
const notHoming: Check = (v, _m, mask) => (v.homingMask ? refuse(NATIVE_REASON.mode_conflict, mask || v.homingMask, 'native Home in progress') : null);
const notStopping: Check = (v, _m, mask) => (v.stopDraining ? refuse(NATIVE_REASON.inhibited, mask, 'stop draining') : null);
const notHomingOrStopping: Check = (v, _m, mask) => (v.homingMask || v.stopDraining ? refuse(NATIVE_REASON.mode_conflict, mask, 'Home or stop in progress') : null);
const somethingEnabled: Check = (v) => (v.enableMask === 0 ? refuse(NATIVE_REASON.not_ready, 0, 'no axis is enabled') : null);
const axesFree: Check = (v, _m, mask) => {
  const c = v.laneConflicts(mask);
  return c ? refuse(NATIVE_REASON.mode_conflict, c, 'another motion lane owns the axes') : null;
};
/** halt: "inhibited (a Stop in flight, or core not armed, enabled and ready; native Home ... also refuse)". */
const armedEnabledReady: Check = (v) => {
  const ready = v.armed && v.enableMask !== 0 && (v.enabledMask() & v.enableMask) === v.enableMask && v.faults.size === 0;
  return !ready || v.homingMask || v.stopDraining ? refuse(NATIVE_REASON.inhibited, v.enableMask, 'core not armed, enabled and ready') : null;
};
const disarmedIdle: Check = (v, _m, mask) =>
  v.armed || v.enabledMask() || v.homingMask ? refuse(NATIVE_REASON.mode_conflict, mask, 'armed, enabled or commissioning') : null;
const absoluteValid: Check = (v, _m, mask) => {
  for (let i = 0; i < v.machine.axes.length; i++) {
    if (mask & (1 << i) && !v.image.absoluteValid[i]) return refuse(NATIVE_REASON.not_ready, 1 << i, 'absolute source invalid');
  }
  return null;
};
const ioConfigured: Check = (v) => ((v.machine.io?.outputs.length ?? 0) === 0 ? refuse(NATIVE_REASON.io_not_configured, 0, 'no cell I/O configured') : null);
const exchangeComplete: Check = (v) =>
  v.image.wkcActual < v.image.wkcExpected || !v.image.ioInputValid ? refuse(NATIVE_REASON.io_exchange_lost, 0, 'no current complete exchange') : null;
const readbackOff: Check = (v) => {
  const outputs = v.machine.io?.outputs.length ?? 0;
  const outMask = outputs >= 16 ? 0xffff : (1 << outputs) - 1;
  return (v.image.ioInputWord & outMask) !== (v.image.ioOutputWord & outMask)
    ? refuse(NATIVE_REASON.io_readback_disagreement, 0, 'output readback differs from the commanded OFF state')
    : null;
};
const fastInputs: Check = (v) => {
  let fast = 0;
  v.machine.io?.inputs.forEach((inp, i) => {
    if (inp.fast) fast |= 1 << i;
  });
  return ((v.image.ioInputWord >>> 16) & fast) !== fast ? refuse(NATIVE_REASON.io_fast_input_unsatisfied, 0, 'a fast input is not satisfied') : null;
};

const noLateMarker: Check = (v) =>
  v.faults.latched.has(FAULT.io_marker_late!) ? refuse(NATIVE_REASON.io_marker_late, 0, 'an output marker missed its one-cycle bound (reset_fault clears it)') : null;

// ---- the start gate (document 1 part 4: the same gate for start_trajectory and start_program) ----

const planIsPrepared: Check = (v, m) =>
  !v.preparedPlan || v.preparedPlan.handle !== m.handle ? refuse(NATIVE_REASON.unknown_handle, 0, `handle ${m.handle ?? 0n} is not in the core's plan slot`) : null;
/** Another lane than the trajectory lane (a later Start replaces a running trajectory: part 3). */
const planAxesFree: Check = (v) => {
  const c = v.laneConflicts(v.preparedPlan!.axisMask, 'trajectory');
  return c ? refuse(NATIVE_REASON.mode_conflict, c, 'another motion lane owns the axes') : null;
};
const notStoppingInhibited: Check = (v) => (v.stopDraining ? refuse(NATIVE_REASON.inhibited, 0, 'stop draining') : null);
/** Armed, every axis of the plan enabled with fresh feedback, homed where the axis requires it. */
const planAxesReady: Check = (v) => {
  const mask = v.preparedPlan!.axisMask;
  if (!v.armed) return refuse(NATIVE_REASON.not_ready, mask, 'not armed');
  const en = v.enabledMask();
  if ((en & mask) !== mask) return refuse(NATIVE_REASON.not_ready, mask & ~en, 'axes of the trajectory are not enabled');
  for (let i = 0; i < v.machine.axes.length; i++) {
    if (!((mask >>> i) & 1)) continue;
    if (!v.image.pdoFresh[i]) return refuse(NATIVE_REASON.not_ready, 1 << i, 'feedback not fresh');
  }
  return null;
};
const planHomed: Check = (v) => {
  const mask = v.preparedPlan!.axisMask;
  let missing = 0;
  v.machine.axes.forEach((a, i) => {
    if ((mask >>> i) & 1 && a.require_home && !((v.homeValidMask >>> i) & 1)) missing |= 1 << i;
  });
  return missing ? refuse(NATIVE_REASON.not_ready, missing, 'axes that require Home have no valid Home') : null;
};
const planStartsHere: Check = (v) => {
  const off = v.startMismatch(v.preparedPlan!);
  return off ? refuse(NATIVE_REASON.not_ready, off, 'the trajectory does not begin at the held position') : null;
};
const planIoArmed: Check = (v) => (v.preparedPlan!.onIntents && !v.ioArmed ? refuse(NATIVE_REASON.io_not_armed, 0, 'an ON intent needs io_arm first') : null);

// ---- jog (document 1 part 4 begin_jog, end_jog, jog; docs/profile.md "Jog") ----

/** Jogging energises drives: armed, and every selected axis enabled with fresh feedback (no Home needed). */
const jogAxesReady: Check = (v, _m, mask) => {
  if (!v.armed) return refuse(NATIVE_REASON.not_ready, mask, 'not armed');
  const en = v.enabledMask();
  if ((en & mask) !== mask) return refuse(NATIVE_REASON.not_ready, mask & ~en, 'axes to jog are not enabled');
  for (let i = 0; i < v.machine.axes.length; i++) if ((mask >>> i) & 1 && !v.image.pdoFresh[i]) return refuse(NATIVE_REASON.not_ready, 1 << i, 'feedback not fresh');
  return null;
};
const jogAxesFree: Check = (v, _m, mask) => {
  const c = v.laneConflicts(mask, 'jog');
  return c ? refuse(NATIVE_REASON.mode_conflict, c, 'another motion lane owns the axes') : null;
};
/** Legacy jog never takes over an open independent jog generation. */
const noIndependentJog: Check = (v, _m, mask) => (v.jog.open && v.jog.mode === 1 ? refuse(NATIVE_REASON.mode_conflict, mask, 'an independent jog generation is open') : null);
// Document 1 part 4 end_jog: the "exact current nonzero independent jog generation": a legacy jog's
// generation (Mode 2) is not end_jog's to end.
const currentJogGeneration: Check = (v, m) =>
  jogSessionStale({ open: v.jog.open, independent: v.jog.mode === JOG_MODE.independent, generation: v.jog.generation }, m.handle ?? 0n)
    ? refuse(NATIVE_REASON.jog_session_stale, 0, `jog generation ${m.handle ?? 0n} is not the current open one (${v.jog.open ? v.jog.generation : 'none open'})`)
    : null;

/** Operation -> checks, in order. */
export const ADMISSION: Readonly<Record<NativeOpName, readonly Check[]>> = {
  stop: [],
  grant: [],
  mark: [fenced],
  enable: [fenced, inGroup, safetyClosedIfEnabling, noRestartRequired, noFaultsOnMask, notHoming, notStopping],
  arm: [fenced, safetyClosed, noFaults, notHoming, somethingEnabled],
  halt: [fenced, armedEnabledReady],
  home: [fenced, nonzeroInGroup, safetyClosed, noFaults, notHomingOrStopping, axesFree],
  reset_fault: [fenced],
  recovery_status: [fenced],
  restore_anchor: [fenced, nonzeroInGroup, disarmedIdle, absoluteValid],
  io_arm: [fenced, ioConfigured, safetyClosed, exchangeComplete, readbackOff, fastInputs, noLateMarker],
  io_disarm: [fenced, ioConfigured],
  prepare: [fenced, nonzeroInGroup],
  start: [fenced, planIsPrepared, safetyClosed, noFaults, notStoppingInhibited, notHoming, planAxesFree, planAxesReady, planHomed, planStartsHere, planIoArmed],
  discard: [fenced],
  begin_jog: [fenced, nonzeroInGroup, safetyClosed, noFaults, notHoming, notStoppingInhibited, jogAxesFree, jogAxesReady],
  end_jog: [fenced, currentJogGeneration],
  jog: [fenced, nonzeroInGroup, safetyClosed, noFaults, notHoming, notStoppingInhibited, jogAxesFree, noIndependentJog, jogAxesReady],
};

/** The first refusal for `m`, or null when the core may carry it out. */
export function admit(v: AdmissionView, m: Cmd): Refusal | null {
  const mask = m.axisMask >>> 0;
  const checks = ADMISSION[m.op];
  if (!checks) return refuse(NATIVE_REASON.unsupported, mask, `native ${m.op} is not available in this core build`);
  for (const c of checks) {
    const r = c(v, m, mask);
    if (r) return r;
  }
  return null;
}
