// The Describe and Status views of the control service (document 1 part 2 "Observation types"; the
// fields the documents leave open: docs/profile.md "Describe and Status fields"): plain functions of what
// the service and the core's last published status hold.

import type { CompiledMachine } from '../config/types.ts';
import type { CoreStatus } from '../core/protocol.ts';
import type { Authority } from './authority.ts';
import { CAPABILITIES, capabilityInfo, DOCUMENTED_CAPABILITY } from './capabilities.ts';
import type { CoreLink } from './core-link.ts';
import type { Binding } from './envelope.ts';
import type { HandleTable } from './handles.ts';

export const CONTRACT_VERSION = 2;

/** What the views read. */
export interface ViewSource {
  machine: CompiledMachine;
  core: CoreLink;
  binding: Binding;
  adapterIncarnation: string;
  daemonIncarnation(): string;
  idleTimeoutNs: bigint;
  authority: Authority;
  handles: HandleTable;
  /** update_jog is served (jog.sock is up). */
  jogServed(): boolean;
  /** The remote listener is up (resource is served). */
  remoteListening(): boolean;
}

export function describeData(v: ViewSource): Record<string, unknown> {
  const m = v.machine;
  return {
    contract_version: CONTRACT_VERSION,
    backend: m.backend,
    // Nothing physical moves unless the attached driver is a real bus (sim and replay are simulated).
    simulated: m.backend === 'simulation' || v.core.driverName !== 'ethercat',
    driver: v.core.driverName,
    clock: v.core.clockMode,
    machine_sha256: m.machine_sha256,
    configuration_sha256: m.configuration_sha256,
    deployment_sha256: m.deployment_sha256,
    binding: v.binding,
    adapter_incarnation: v.adapterIncarnation,
    daemon_incarnation: v.daemonIncarnation(),
    cycle_ns: m.cycle_ns,
    control_idle_timeout_ns: v.idleTimeoutNs,
    link_profile: m.control.link_profile,
    max_grant_lease_ms: m.control.max_grant_lease_ns / 1_000_000n,
    max_jog_input_age_ns: m.control.max_jog_input_age_ns,
    capabilities: CAPABILITIES.map((c) => {
      // update_jog is served only while jog.sock is (the independent jog lane; the remote WebSocket feeds it).
      if (c.name === 'update_jog' && !v.jogServed()) return { name: c.name, state: 'unimplemented', transport: 'none' };
      // resource is served only by the remote listener (document 1 part 5): implemented while one listens.
      if (c.name === 'resource' && v.remoteListening()) return capabilityInfo(DOCUMENTED_CAPABILITY.get('resource')!);
      return capabilityInfo(c);
    }),
    axes: m.axes.map((a) => ({
      id: a.id,
      position_unit: a.position_unit,
      min_position: a.min_position,
      max_position: a.max_position,
      max_velocity: a.max_velocity,
      native_home: a.native_home,
      require_home: a.require_home,
      counts_per_unit: a.counts_per_unit,
      sign: a.sign,
    })),
    io: m.io ? { outputs: m.io.outputs.map((o) => ({ name: o.name, torch: o.torch })) } : null,
  };
}

export function statusData(v: ViewSource): Record<string, unknown> {
  const s: CoreStatus | undefined = v.core.status;
  v.authority.checkExpiry();
  const g = v.authority.current;
  return {
    now_host_ns: v.core.serviceNow(),
    adapter_incarnation: v.adapterIncarnation,
    daemon_incarnation: v.daemonIncarnation(),
    core: s
      ? {
          armed: s.armed ? 1 : 0,
          home_valid_mask: s.home_valid_mask,
          safety_fault_mask: s.safety_fault_mask,
          home_epoch: s.home_epoch,
          axis_enable_mask: s.enable_mask,
          execution_fault_reasons: s.execution_fault_reasons,
          io_armed: s.io_armed ? 1 : 0,
          io_output_word: s.io_output_word,
          cycle: s.cycle,
          published_host_ns: s.now_ns,
          overruns: s.timing.overruns,
          grant_observation: s.grant_observation,
        }
      : null,
    commissioning: { phase: s?.commissioning_phase ?? 'idle' },
    grant: {
      active: g !== null,
      stopping: g?.stopping ?? false,
      generation: g?.generation ?? v.authority.lastGeneration,
      controller: g?.controller ?? '',
      lease_ms: g?.leaseMs ?? 0n,
      deadline_host_ns: g?.deadlineNs ?? 0n,
      draining: v.authority.draining,
    },
    axes: (s?.axes ?? []).map((a) => ({
      id: a.id,
      ready: a.ready,
      enabled: a.enabled,
      ds402_state: a.ds402_state,
      fault: a.fault,
      error_code: a.error_code,
      position: a.position,
      velocity: a.velocity,
      following_error: a.following_error,
      pdo_fresh: a.pdo_fresh,
      online: a.online,
      brake_engaged: a.brake_engaged,
    })),
    execution: {
      handles: v.handles.all().map((h) => ({
        handle: h.handle,
        state: h.state,
        generation: h.generation,
        execution_generation: h.execution_generation,
        native_sequence: h.native_sequence,
        ...(h.identity ? { identity: h.identity } : {}),
      })),
      generation: v.handles.execution.generation,
      state: v.handles.execution.state,
      // Data objects carry all their fields (docs/profile.md "Reply envelope"): an execution with no
      // identity (nothing prepared yet, or a raw trajectory prepared without one) shows the empty one.
      identity: v.handles.execution.identity ?? EMPTY_IDENTITY,
      segment: executionSegment(v, s?.plan_cursor),
      native_sequence: v.handles.execution.native_sequence,
      ...(v.handles.execution.error ? { error: v.handles.execution.error } : {}),
    },
    motion: s?.motion ?? null,
    plan_cursor: s?.plan_cursor ?? null,
  };
}

/**
 * Execution.segment (document 1 part 2): the program segment of the interval the core executes, the
 * last one reached when the execution ended; 0 for trajectories.
 */
function executionSegment(v: ViewSource, cursor: { active_handle: bigint; sample_index: number } | undefined): number {
  const x = v.handles.execution;
  const rec = v.handles.get(x.handle);
  if (x.state !== 'executing' || !rec?.segmentOf || !cursor || cursor.active_handle !== x.handle) return x.segment;
  return rec.segmentOf[Math.min(cursor.sample_index + 1, rec.segmentOf.length - 1)]!;
}

const EMPTY_IDENTITY = Object.freeze({
  plan_id: '',
  program_id: '',
  program_digest: '',
  trajectory_digest: '',
  source_digest: '',
  normalised_digest: '',
  manifest_revision: 0n,
  plan_revision: 0n,
});
