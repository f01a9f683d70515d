// The service's capability table (document 1 part 4). Describe reports it at run time and the dispatcher
// uses it to know which operations POST /v1/control accepts: one table, so Describe can only claim what
// this build serves. `DOCUMENTED` is the goal (part 4's State column); a capability this build does not
// serve yet is reported, and answered, as `unimplemented` with transport `none` (part 1: "unimplemented:
// returns capability_unimplemented"). To serve one, add its handler and list it in SERVED.

export type CapabilityState = 'implemented' | 'interim' | 'test_only' | 'unimplemented';

export interface Capability {
  name: string;
  state: CapabilityState;
  /** The ingress as reported by Describe (`none` for unimplemented operations). */
  transport: string;
  /** Whether the operation is dispatched through POST /v1/control. */
  control: boolean;
  /** Whether the operation carries the fence (session + generation). */
  fenced: boolean;
}

const C = 'POST /v1/control';

function cap(name: string, state: CapabilityState, transport: string, fenced: boolean): Capability {
  return { name, state, transport, control: transport === C || state === 'unimplemented', fenced };
}

const DOCUMENTED: readonly Capability[] = [
  cap('telemetry', 'implemented', 'GET /v1/telemetry?after=<sequence>; GET /v1/telemetry/stream?after=<sequence>', false),
  cap('mark_telemetry', 'implemented', C, true),
  cap('acquire', 'implemented', C, false),
  cap('renew', 'implemented', C, true),
  cap('release', 'implemented', C, true),
  cap('stop', 'implemented', C, true),
  cap('enable', 'implemented', C, true),
  cap('arm', 'implemented', C, true),
  cap('home', 'implemented', C, true),
  cap('reset_fault', 'interim', C, true),
  cap('recovery_status', 'implemented', C, true),
  cap('jog', 'test_only', C, true),
  cap('begin_jog', 'implemented', C, true),
  cap('end_jog', 'implemented', C, true),
  cap('prepare_trajectory', 'implemented', C, true),
  cap('start_trajectory', 'implemented', C, true),
  cap('discard_trajectory', 'implemented', C, true),
  cap('start_program', 'implemented', C, true),
  cap('describe', 'implemented', 'GET /v1/describe', false),
  cap('status', 'implemented', 'GET /v1/status', false),
  cap('jog_clock', 'implemented', 'GET /v1/jog/clock', false),
  cap('jog_status', 'implemented', 'GET /v1/jog (local socket)', false),
  cap('jog_ingress', 'implemented', 'GET /v1/jog/ingress', false),
  cap('prepare_program', 'implemented', 'POST /v1/program', true),
  cap('update_jog', 'implemented', 'datagram on jog.sock, or WebSocket on remote GET /v1/jog', true),
  cap('halt', 'implemented', C, true),
  cap('abort', 'unimplemented', 'none', false),
  cap('subscribe_events', 'implemented', 'GET /v1/events?after=<sequence>; GET /v1/events/stream?after=<sequence> (SSE)', false),
  cap('readiness', 'unimplemented', 'none', false),
  cap('restore_anchor', 'implemented', C, true),
  cap('io_arm', 'implemented', C, true),
  cap('io_disarm', 'implemented', C, true),
  cap('resource', 'implemented', 'GET /v1/resources/<sha256>', false),
];

/** The capabilities this build serves on their documented transport (the rest answer capability_unimplemented). */
export const SERVED: ReadonlySet<string> = new Set([
  'telemetry', 'mark_telemetry', 'acquire', 'renew', 'release', 'stop', 'enable', 'arm', 'home', 'reset_fault',
  'recovery_status', 'describe', 'status', 'halt', 'subscribe_events', 'restore_anchor', 'io_arm', 'io_disarm',
  'prepare_trajectory', 'start_trajectory', 'discard_trajectory', 'prepare_program', 'start_program',
  // jog (document 1 part 4); update_jog is reported unimplemented while jog.sock is not served (service.ts describe)
  'jog', 'begin_jog', 'end_jog', 'jog_clock', 'jog_status', 'jog_ingress', 'update_jog',
]);

/** The capability table as served: documented state where served, else unimplemented with transport none. */
export const CAPABILITIES: readonly Capability[] = DOCUMENTED.map((c) =>
  SERVED.has(c.name) || c.state === 'unimplemented' ? c : { ...c, state: 'unimplemented' as const, transport: 'none' },
);

/** The documented entry of a capability, whatever this build serves. */
export const DOCUMENTED_CAPABILITY = new Map(DOCUMENTED.map((c) => [c.name, c]));

export const CAPABILITY = new Map(CAPABILITIES.map((c) => [c.name, c]));

export function capabilityInfo(c: Capability): { name: string; state: string; transport: string } {
  return { name: c.name, state: c.state, transport: c.transport };
}
