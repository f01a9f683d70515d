// A clean-room control service: test equipment, like the simulated bench box (harness/benchbox/simbox.ts).
// It is a second, independent reading of document 1 (/work/shared/spec/1-control-service.md) written from
// the document alone, without looking at the reference stack (sims/, drivers/), so that running the suites
// against it (`hil cleanroom serve`, then `hil run --target external`) shows which tests ask for more than
// the document says. It implements the envelope rules (part 4), grant authority (acquire, renew, release,
// stop: generations, sessions, leases, fences; parts 2, 3, 4), Describe, Status and events (poll and SSE,
// part 6) over HTTP/1.1 on a Unix socket and, with `--remote-listen`, over HTTPS with mutual TLS 1.3
// (part 5, part 8 remote timeouts: harness/cleanroom/remote.ts, credentials.ts, connections.ts), where
// sessions belong to the certificate's principal and `resource` is served; every other capability is
// declared `unimplemented` in Describe and answered `capability_unimplemented` (part 1).
//
// Everything the document states is followed. Where it says "not shown" (or leaves a choice open), this
// service decides on its own, on purpose often otherwise than docs/profile.md, the way another reasonable
// implementer might:
//
// | detail the document leaves open                      | this service                                          | docs/profile.md                       |
// |------------------------------------------------------|-------------------------------------------------------|---------------------------------------|
// | `operation` of a refusal (part 2 "the operation answered") | the requested `operation` string whenever the body has one (even an unknown name); `unknown` otherwise | the requested capability, else `unknown` |
// | envelope check order (two rules broken at once)      | JSON, unknown field names (all of them), operation, schema, request_id, field types, unimplemented capability, required fields, the operation | schema before operation, names and types field by field |
// | `null` for a field other than request_id             | the same as the field absent                          | invalid_request_envelope             |
// | mistyped or zero `generation` (part 7 lists invalid_control_generation) | invalid_control_generation             | invalid_request_envelope / control_session_stale |
// | mistyped `requested_lease_ms` (acquire lists invalid_requested_lease) | invalid_requested_lease                  | invalid_request_envelope             |
// | acquire check order                                  | controller, requested lease, ownership, binding, generation exhaustion | controller, lease, binding, ownership |
// | acquire without a binding                            | authority_binding_mismatch (nothing to equal)          | invalid_request_envelope             |
// | acquire retried with the same request_id             | no replay: there is no current session to remember it (part 4) | replays the grant            |
// | retry cache after a stop or revocation               | gone with the grant (only the current session remembers) | kept for 8 ended sessions           |
// | `after` on events                                    | any run of decimal digits up to 2^64-1 (`after=01` is 1); anything else, empty or repeated: invalid_event_cursor | no leading zero |
// | EventBatch array (part 6: name not shown)            | `records`                                              | `events`                              |
// | events_dropped payload                               | first_lost_sequence and last_lost_sequence only        | adds reason "event_cursor_lost"      |
// | grant event payload                                  | generation and stopping only (the known fields)        | adds controller, lease_ms, deadline  |
// | zero and empty fields (part 2 "Response")            | omitted in the envelope and in the Grant of a control reply (a released grant has no `session`) | only the envelope omits them |
// | Describe fields beyond the listed ones               | binding (a client needs pair_id and revision to acquire), the two incarnations; no lease ceiling, link profile, max_velocity, contract_version, simulated | docs/profile.md "Describe and Status fields" |
// | `backend`                                            | "cleanroom"                                            | the stack's backend                  |
// | Status                                               | core {armed, home_valid_mask, safety_fault_mask, home_epoch}, commissioning_phase, axes[] {id, ready}, execution, incarnations; no grant receipt | commissioning {phase}, grant {...}, more core and axis fields |
// | stop drain                                           | 100 ms (no core to wait for), then grant_revoked      | until the core reports the drain done |
// | a second stop while one drains                       | accepted, the generation is not advanced again         |                                       |
// | unknown endpoint                                     | HTTP 409 unknown_endpoint, operation `unknown`         | the same                              |
// | an unimplemented capability with its own path (telemetry, jog observations, /v1/program) | 409 capability_unimplemented with CapabilityInfo, operation its name | (implemented) |
// | idle close (part 1, part 8: 90 s)                    | 90 s after the end of the last reply, looked at every 250 ms, on both transports; no Keep-Alive hint (Describe reports the bound) | keepAliveTimeout 89 s, `Keep-Alive: timeout=89` remotely |
// | `--remote-listen` (part 1 defaults)                  | HOST:PORT, HOST (port 8443) or :PORT (host 127.0.0.1), port 0 a free one; the four files and `--pair-id` required, else a usage error (exit 2) | HOST:PORT with the same defaults |
// | start-up checks (part 5 item 6, exit 2)              | the four files load as one set: `--remote-ca` exactly one PEM CERTIFICATE, a CA, self-signed; `--remote-cert` (first certificate; the rest its chain) matched by `--remote-key`, whoever issued it; `--remote-crl` exactly one X509 CRL of the CA (issuer and signature), no critical extension not understood, a nextUpdate; and the process sends no session tickets. The CRL's window is judged per handshake, not at start | the server certificate must be the CA's |
// | session tickets disabled (item 5)                    | SSL_OP_NO_TICKET and no NewSessionTicket: node runs with harness/cleanroom/no-tickets.cnf (NumTickets = 0), checked at start by a handshake of its own | the same, with its own configuration file |
// | "modification time changes" (item 5)                 | a file's mtime (ns) or inode differs from the last load (a file replaced by rename counts); looked at on every TCP connection | mtime, inode or size |
// | where a refusal happens                              | failed load or CRL outside its window: on the TCP connection, before any TLS byte; the certificate: after the handshake, closed without an alert or a byte | the same |
// | client certificate rules beyond items 2 and 3        | not a CA; it and the CA inside their validity; key usage, when present, digitalSignature; extended key usage, when present, clientAuth or any; no critical extension not understood; URIs other than svc-principal and svc-pair ignored | not a CA, issued directly, OpenSSL's verdict |
// | CRL extensions understood (item 4)                   | CRL number, authority key identifier; entries: reason code, invalidity date; a listed serial is revoked whatever its revocation date; a CRL not yet valid is "remote CRL not current" too | the same list |
// | handshake time                                       | counted in the header bound (2 s on LAN)                | the same                              |
// | remote log (one line each)                           | `cleanroom remote: handshake with <addr>:<port> refused: <why>`, `...: credential files changed; loaded again` or `; load failed: <why>; new handshakes are refused until they load`; stderr, or `--log-file` | `remote: refused handshake from ...`, `remote: credentials reloaded` ... |
// | "65 s write a reply" (part 8)                        | a connection with a request in flight whose outgoing bytes are found queued at every look (250 ms) for 65 s is destroyed: a reply is taken within 65 s however it trickles | cut after 65 s in which no byte moved |
// | header and request bounds (part 8)                   | Node's headersTimeout and requestTimeout, looked at every 250 ms (Node answers 408) | the same                              |
// | link profile (part 8 "LAN defaults")                 | `--link-profile lan` (default) or internet: the header bound only | the machine's control.link_profile |
// | ownership of an ended session (part 5 item 3)        | none: judged for the current grant only (before its generation and before a request_id replay); an ended session answers by its state to anyone | checked first, outlives the grant |
// | acquire under another owner's request_id             | control_already_owned (acquire never replays, above)    | session_principal_mismatch            |
// | `resource` (part 4)                                  | implemented, with no compiled resource: remote `GET /v1/resources/<64 hex digits, either case>` is 404 resource_unknown; other text after /v1/resources/ is unknown_endpoint; the Unix socket answers unknown_endpoint | lowercase only; other text resource_unknown |
// | remote jog clock flags (part 5 item 6)               | `--remote-jog-*` taken beside `--remote-listen` as decimal uint64, else a usage error (exit 2); unused: no jog lane | the remote jog clock's qualification |
// | remote `GET /v1/jog` (part 5: always the WebSocket)  | update_jog's path: 409 capability_unimplemented, no upgrade | the jog WebSocket                     |
// | browser requests on the remote listener              | served like any other: the client certificate is the authentication | 403 cross_site_request with Origin or a cross-site Sec-Fetch-Site |
// | Describe's binding pair_id                           | `--pair-id`, `cleanroom-pair` without it               |                                       |
//
// The machine (axes, digests, binding) is a small fixed example: three rotary axes and one linear axis.

import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { canonicalJson, isJsonObject, parseExact, stringifyExact, type JsonExact, type JsonObject } from '../oracle/json.ts';
import { OracleError } from '../oracle/errors.ts';
import { watchConnections } from './connections.ts';
import { CredentialError, loadCredentials, type CredentialFiles } from './credentials.ts';
import { NO_TICKETS_CNF, RemoteListener, remoteBounds, ticketsDisabled } from './remote.ts';

const REQUEST_SCHEMA = 'svc.rt-control.request.v1';
const RESPONSE_SCHEMA = 'svc.rt-control.response.v1';
const U64_MAX = (1n << 64n) - 1n;
const BODY_LIMIT = 16384; // part 8, ordinary command body
const EVENT_RING = 256; // part 6
const EVENTS_PER_POLL = 64;
const IDLE_TIMEOUT_NS = 90_000_000_000n; // part 1, part 8
const CYCLE_NS = 1_000_000n;
const DEFAULT_LEASE_MS = 500; // part 2 requested_lease_ms
const STOP_DRAIN_MS = 100;

/** Part 4's table: name, documented transport. Only the set below is served; the rest is unimplemented. */
const CAPABILITIES: ReadonlyArray<[string, string]> = [
  ['telemetry', 'GET /v1/telemetry?after=<sequence>; GET /v1/telemetry/stream?after=<sequence>'],
  ...['mark_telemetry', 'acquire', 'renew', 'release', 'stop', 'enable', 'arm', 'home', 'reset_fault', 'recovery_status', 'jog', 'begin_jog', 'end_jog', 'prepare_trajectory', 'start_trajectory', 'discard_trajectory', 'start_program'].map(
    (n): [string, string] => [n, 'POST /v1/control'],
  ),
  ['describe', 'GET /v1/describe'],
  ['status', 'GET /v1/status'],
  ['jog_clock', 'GET /v1/jog/clock'],
  ['jog_status', 'GET /v1/jog (local socket)'],
  ['jog_ingress', 'GET /v1/jog/ingress'],
  ['prepare_program', 'POST /v1/program'],
  ['update_jog', 'datagram on jog.sock, or WebSocket on remote GET /v1/jog'],
  ['halt', 'POST /v1/control'],
  ['abort', 'POST /v1/control (no transport)'],
  ['subscribe_events', 'GET /v1/events?after=<sequence>; GET /v1/events/stream?after=<sequence> (SSE)'],
  ['readiness', 'POST /v1/control (no transport)'],
  ['restore_anchor', 'POST /v1/control'],
  ['io_arm', 'POST /v1/control'],
  ['io_disarm', 'POST /v1/control'],
  ['resource', 'GET /v1/resources/<sha256>'],
];
const IMPLEMENTED = new Set(['acquire', 'renew', 'release', 'stop', 'describe', 'status', 'subscribe_events', 'resource']);
/** Operations POST /v1/control dispatches (part 2: "only POST /v1/control operations dispatch here"). */
const CONTROL_OPERATIONS = new Set(CAPABILITIES.filter(([, t]) => t.startsWith('POST /v1/control')).map(([n]) => n));

function capabilityInfo(name: string): JsonObject {
  const transport = CAPABILITIES.find(([n]) => n === name)![1];
  return IMPLEMENTED.has(name) ? { name, state: 'implemented', transport } : { name, state: 'unimplemented', transport: 'none' };
}

// Part 2 "Request": every field and its type. A wrong type is invalid_request_envelope unless the field has
// a label of its own (part 7 invalid_control_generation; acquire's invalid_requested_lease; invalid_request_id).
type Kind = 'string' | 'u64' | 'u64nz' | 'u32' | 'int' | 'f64[]' | 'array' | 'object' | 'binding';
const FIELDS: Record<string, Kind> = {
  request_id: 'string', schema: 'string', operation: 'string', session: 'string', generation: 'u64nz', label: 'string',
  controller: 'string', binding: 'binding', axis_mask: 'u32', velocity: 'f64[]', timeout_ms: 'u32', handle: 'u64',
  points: 'array', identity: 'object', jog_generation: 'u64', source_sequence: 'u64', source_origin_host_ns: 'u64',
  deadline_host_ns: 'u64', clock_incarnation: 'string', requested_lease_ms: 'int',
};
const TYPE_LABEL: Record<string, string> = { generation: 'invalid_control_generation', requested_lease_ms: 'invalid_requested_lease' };
// revision 0 decodes (a uint64) and is then simply not the configured revision: authority_binding_mismatch.
const BINDING_FIELDS: Record<string, Kind> = { pair_id: 'string', revision: 'u64', configuration_sha256: 'string', machine_sha256: 'string' };

function hasKind(v: JsonExact, k: Kind): boolean {
  switch (k) {
    case 'string': return typeof v === 'string';
    case 'u64': return typeof v === 'bigint' && v >= 0n && v <= U64_MAX;
    case 'u64nz': return typeof v === 'bigint' && v > 0n && v <= U64_MAX;
    case 'u32': return typeof v === 'bigint' && v >= 0n && v <= 0xffff_ffffn;
    case 'int': return typeof v === 'bigint' && v >= -(1n << 63n) && v < 1n << 63n;
    case 'f64[]': return Array.isArray(v) && v.every((x) => (typeof x === 'number' && Number.isFinite(x)) || typeof x === 'bigint');
    case 'array': return Array.isArray(v);
    case 'object': return isJsonObject(v);
    case 'binding': return isJsonObject(v) && Object.entries(v).every(([f, x]) => Object.hasOwn(BINDING_FIELDS, f) && hasKind(x, BINDING_FIELDS[f]!));
  }
}

class Refusal {
  constructor(
    readonly label: string,
    readonly detail = '',
    readonly data?: JsonObject,
    readonly status = 409,
  ) {}
}

interface Reply {
  status: number;
  body: JsonObject;
}

interface Grant {
  session: string;
  generation: bigint;
  controller: string;
  lease_ms: number;
  deadline: bigint;
  stopping: boolean;
  timer?: NodeJS.Timeout;
  drain?: NodeJS.Timeout;
  /** request_id → the decoded request and the final reply (part 4: last 256 outcomes per session). */
  outcomes: Map<string, { payload: string; reply: Reply }>;
  /** Who acquired it (part 5 items 1 and 3): the local transport, or a remote principal. */
  owner: Owner;
}

/** `local` for the Unix socket (part 5 item 1), `principal:<id>` for a remote client certificate (item 3). */
export type Owner = 'local' | `principal:${string}`;

export interface CleanroomOptions {
  socketDir: string;
  /** `--pair-id`: the binding's pair id (part 2 Binding) and the pair every client certificate names (part 5 item 3). */
  pairId?: string;
  /** The remote listener (part 5): `--remote-listen` and the four credential files. */
  remote?: { host: string; port: number; files: CredentialFiles; linkProfile?: 'lan' | 'internet' };
  /** Where the remote listener's lines go (default stderr). */
  log?: (line: string) => void;
  /** The cell's lease ceiling (part 8: LAN profile 500 ms). */
  leaseCeilingMs?: number;
  /** How long an admitted stop drains before the grant is revoked (default 100 ms). */
  stopDrainMs?: number;
}

const now = (): bigint => process.hrtime.bigint();
const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

export class CleanroomService {
  readonly adapterIncarnation = hex(16);
  readonly daemonIncarnation = hex(16);
  private readonly ceilingMs: number;
  private readonly server: Server;
  private readonly axes = [
    { id: 'J1', position_unit: 'rad', min_position: -2.9, max_position: 2.9, native_home: true, counts_per_unit: 162975, sign: 1 },
    { id: 'J2', position_unit: 'rad', min_position: -1.7, max_position: 2.2, native_home: false, counts_per_unit: 162975, sign: -1 },
    { id: 'J3', position_unit: 'rad', min_position: -3.1, max_position: 3.1, native_home: true, counts_per_unit: 81487, sign: 1 },
    { id: 'X1', position_unit: 'm', min_position: 0.05, max_position: 1.45, native_home: true, counts_per_unit: 2000000, sign: 1 },
  ];
  private readonly binding: { pair_id: string; revision: bigint; configuration_sha256: string; machine_sha256: string };
  private readonly remote: RemoteListener | undefined;
  private readonly unwatch: () => void;
  private generation = 0n;
  private grant: Grant | undefined;
  /** Sessions this adapter issued that have ended, and how (part 7: expired vs stale vs never issued). */
  private ended = new Map<string, 'expired' | 'ended'>();
  private events: JsonObject[] = [];
  private nextSequence = 1n;
  private streams = new Set<ServerResponse>();
  private keepalive: NodeJS.Timeout;

  constructor(private readonly options: CleanroomOptions) {
    this.ceilingMs = options.leaseCeilingMs ?? 500;
    this.binding = {
      pair_id: options.pairId ?? 'cleanroom-pair',
      revision: 3n,
      configuration_sha256: sha('cleanroom configuration'),
      machine_sha256: sha('cleanroom machine'),
    };
    // keepAliveTimeout 0: Node would close a kept connection a second after it; the watch closes it at 90 s.
    this.server = createServer({ keepAliveTimeout: 0 }, (req, res) => void this.route(req, res, 'local'));
    this.server.headersTimeout = 10_000;
    this.unwatch = watchConnections(this.server, { idleMs: Number(IDLE_TIMEOUT_NS / 1_000_000n), checkMs: 250 });
    const r = options.remote;
    if (r) {
      this.remote = new RemoteListener({
        host: r.host,
        port: r.port,
        files: r.files,
        pairId: this.binding.pair_id,
        bounds: remoteBounds(r.linkProfile ?? 'lan'),
        log: options.log ?? ((l) => process.stderr.write(`${l}\n`)),
        handler: (req, res, principal) => void this.route(req, res, `principal:${principal}`),
      });
    } else this.remote = undefined;
    this.keepalive = setInterval(() => this.streams.forEach((s) => s.write(': keepalive\n\n')), 15_000);
    this.keepalive.unref();
    // Part 6: adapter_incarnation_changed once at start, daemon_incarnation_changed once at adapter start.
    this.publish('adapter_incarnation_changed', 'incarnation', { previous: '', current: this.adapterIncarnation });
    this.publish('daemon_incarnation_changed', 'incarnation', { previous: '', current: this.daemonIncarnation });
  }

  get socketPath(): string {
    return join(this.options.socketDir, 'control.sock');
  }

  /** Where the remote listener listens (after listen()), `host:port`, or undefined without one. */
  remoteAddress: string | undefined;

  async listen(): Promise<void> {
    const dir = this.options.socketDir;
    mkdirSync(join(dir, 'public'), { recursive: true });
    for (const p of [this.socketPath, join(dir, 'public', 'control.sock')]) {
      try {
        if (lstatSync(p).isSocket() || lstatSync(p).isSymbolicLink()) rmSync(p);
      } catch {
        /* absent */
      }
    }
    await new Promise<void>((resolve, reject) => this.server.once('error', reject).listen(this.socketPath, resolve));
    chmodSync(this.socketPath, 0o660);
    symlinkSync('../control.sock', join(dir, 'public', 'control.sock')); // part 1 "Transports"
    if (this.remote) {
      const a = await this.remote.listen();
      this.remoteAddress = `${a.host}:${a.port}`;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.keepalive);
    this.unwatch();
    for (const g of [this.grant]) if (g) this.clearTimers(g);
    for (const s of this.streams) s.end();
    await this.remote?.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    rmSync(join(this.options.socketDir, 'public', 'control.sock'), { force: true });
    rmSync(this.socketPath, { force: true });
  }

  // ---- HTTP -------------------------------------------------------------------------------------------

  /** One request on either transport; `who` is the transport's identity (part 5 items 1 and 3). */
  private async route(req: IncomingMessage, res: ServerResponse, who: Owner): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    const remote = who !== 'local';
    try {
      if (req.method === 'POST' && path === '/v1/control') return this.send(res, await this.control(req, who));
      if (req.method === 'POST' && path === '/v1/program') return this.send(res, unimplemented('prepare_program'));
      if (req.method === 'GET') {
        if (path === '/v1/describe') return this.send(res, ok('describe', this.description()));
        if (path === '/v1/status') return this.send(res, ok('status', this.status()));
        if (path === '/v1/events') return this.send(res, this.poll(url));
        if (path === '/v1/events/stream') return this.stream(url, res);
        // GET /v1/jog is jog_status on the Unix socket and the jog WebSocket (update_jog) remotely (part 5).
        const other = { '/v1/telemetry': 'telemetry', '/v1/telemetry/stream': 'telemetry', '/v1/jog/clock': 'jog_clock', '/v1/jog': remote ? 'update_jog' : 'jog_status', '/v1/jog/ingress': 'jog_ingress' }[path];
        if (other) return this.send(res, unimplemented(other));
        // Resources are remote only (part 4: "remote mutual TLS required"); this cell has none compiled, so
        // every digest is unknown. A path segment that is not a SHA-256 in hex is not this endpoint.
        if (remote && /^\/v1\/resources\/[0-9a-fA-F]{64}$/.test(path)) return this.send(res, refusal('resource', new Refusal('resource_unknown', '', undefined, 404)));
      }
      this.send(res, refusal('unknown', new Refusal('unknown_endpoint', `${req.method} ${path}`)));
    } catch (e) {
      // Part 7: an open diagnostic is allowed after a label; a defect of this service must still be visible.
      this.send(res, refusal('unknown', new Refusal('cleanroom_defect', String((e as Error)?.message ?? e))));
    }
  }

  private send(res: ServerResponse, r: Reply): void {
    const text = stringifyExact(r.body);
    res.writeHead(r.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  /** The body, or a 413 once it is known to exceed the ordinary limit (the rest is read and dropped). */
  private readBody(req: IncomingMessage): Promise<Buffer | undefined> {
    return new Promise((resolve, reject) => {
      const declared = Number(req.headers['content-length'] ?? NaN);
      let size = 0;
      let over = declared > BODY_LIMIT;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > BODY_LIMIT) over = true;
        if (!over) chunks.push(c);
        if (size > 64 * 1024 * 1024) req.destroy();
      });
      req.on('end', () => resolve(over ? undefined : Buffer.concat(chunks)));
      req.on('close', () => resolve(undefined)); // destroyed (or a client gone): nothing to answer
      req.on('error', reject);
    });
  }

  // ---- POST /v1/control -------------------------------------------------------------------------------

  private async control(req: IncomingMessage, who: Owner): Promise<Reply> {
    const body = await this.readBody(req);
    if (!body) return refusal('unknown', new Refusal('body_too_large', `more than ${BODY_LIMIT} bytes`, undefined, 413));
    let decoded: JsonExact;
    try {
      decoded = parseExact(body);
    } catch (e) {
      const code = e instanceof OracleError ? e.code : 'json_syntax';
      // Bytes that are not UTF-8 after a complete object are trailing data all the same (part 4).
      const trailing = code === 'json_trailing_data' || (code === 'json_invalid_utf8' && completeObjectBefore(body));
      const label = code === 'json_duplicate_key' ? 'duplicate_request_field' : trailing ? 'trailing_request_data' : 'invalid_request_envelope';
      return refusal('unknown', new Refusal(label, (e as Error).message));
    }
    if (!isJsonObject(decoded)) return refusal('unknown', new Refusal('invalid_request_envelope', 'the body is not a JSON object'));
    const asked = typeof decoded.operation === 'string' && decoded.operation !== '' ? decoded.operation : 'unknown';
    try {
      return this.dispatch(decoded, asked, who);
    } catch (e) {
      if (e instanceof Refusal) return refusal(asked, e);
      throw e;
    }
  }

  private dispatch(raw: JsonObject, asked: string, who: Owner): Reply {
    const unknown = Object.keys(raw).find((k) => !Object.hasOwn(FIELDS, k)); // "__proto__" is a name like any other
    if (unknown !== undefined) throw new Refusal('invalid_request_envelope', `unknown field ${unknown}`);
    // null stands for an absent field, except request_id, which must be non-null (part 2).
    const r: JsonObject = Object.create(null);
    for (const [k, v] of Object.entries(raw)) if (v !== null || k === 'request_id') r[k] = v;
    const op = r.operation;
    if (typeof op !== 'string' || !CONTROL_OPERATIONS.has(op)) throw new Refusal('unknown_operation', typeof op === 'string' ? op : 'no operation');
    if (r.schema !== REQUEST_SCHEMA) throw new Refusal('schema_mismatch', `schema must be ${REQUEST_SCHEMA}`);
    if ('request_id' in r && !(typeof r.request_id === 'string' && /^[\x20-\x7e]{1,64}$/.test(r.request_id))) throw new Refusal('invalid_request_id');
    for (const [k, v] of Object.entries(r)) {
      if (!hasKind(v, FIELDS[k]!)) throw new Refusal(Object.hasOwn(TYPE_LABEL, k) ? TYPE_LABEL[k]! : 'invalid_request_envelope', `${k} has the wrong type or range`);
    }
    if (!IMPLEMENTED.has(op)) return unimplemented(op);
    if (op === 'acquire') return this.acquire(r, who);
    for (const f of ['session', 'generation']) if (!(f in r)) throw new Refusal('invalid_request_envelope', `${op} requires ${f}`);
    return this.fenced(op, r, raw, who);
  }

  private acquire(r: JsonObject, who: Owner): Reply {
    if ('session' in r || 'generation' in r) throw new Refusal('invalid_request_envelope', 'session and generation are absent on acquire');
    const controller = r.controller;
    if (typeof controller !== 'string' || Buffer.byteLength(controller) < 1 || Buffer.byteLength(controller) > 63) {
      throw new Refusal('invalid_request_envelope', 'controller must be 1..63 bytes');
    }
    const requested = r.requested_lease_ms === undefined ? 0n : (r.requested_lease_ms as bigint);
    if (requested < 0n || requested > 10000n) throw new Refusal('invalid_requested_lease', 'requested_lease_ms must be 1..10000');
    this.lapse();
    if (this.grant?.stopping) throw new Refusal('control_session_stale', 'a Stop is in flight');
    if (this.grant) throw new Refusal('control_already_owned');
    const b = r.binding;
    const mine = this.binding;
    if (!isJsonObject(b) || b.pair_id !== mine.pair_id || b.revision !== mine.revision || b.configuration_sha256 !== mine.configuration_sha256 || ('machine_sha256' in b && b.machine_sha256 !== mine.machine_sha256)) {
      throw new Refusal('authority_binding_mismatch');
    }
    if (this.generation === U64_MAX) throw new Refusal('application_generation_exhausted');
    const lease = Math.min(requested === 0n ? DEFAULT_LEASE_MS : Number(requested), this.ceilingMs);
    const g: Grant = { session: hex(32), generation: ++this.generation, controller, lease_ms: lease, deadline: 0n, stopping: false, outcomes: new Map(), owner: who };
    this.grant = g;
    this.extend(g);
    this.publish('grant_acquired', 'grant', this.grantEvent(g));
    return ok('acquire', this.grantData(g));
  }

  private fenced(op: string, r: JsonObject, raw: JsonObject, who: Owner): Reply {
    this.lapse();
    const session = r.session as string;
    const g = this.grant?.session === session ? this.grant : undefined;
    // Part 5 item 3: the current session is its owner's alone, whatever the generation, and before any
    // remembered outcome is replayed. An ended session grants nothing to anyone: it answers by its state.
    if (g && g.owner !== who) return refusal(op, new Refusal('session_principal_mismatch', 'the session belongs to another principal or transport'));
    const id = typeof r.request_id === 'string' ? r.request_id : undefined;
    const payload = canonicalJson(raw);
    if (g && id !== undefined) {
      const seen = g.outcomes.get(id);
      if (seen && seen.payload !== payload) return refusal(op, new Refusal('request_id_conflict'));
      if (seen) return seen.reply;
    }
    let reply: Reply;
    try {
      reply = this.fencedOp(op, session, r.generation as bigint, g);
    } catch (e) {
      if (!(e instanceof Refusal)) throw e;
      reply = refusal(op, e);
    }
    // The session remembers its last 256 outcomes while it is current (release drops them, part 4).
    if (g && id !== undefined && this.grant === g) {
      g.outcomes.set(id, { payload, reply });
      if (g.outcomes.size > 256) g.outcomes.delete(g.outcomes.keys().next().value!);
    }
    return reply;
  }

  private fencedOp(op: string, session: string, generation: bigint, g: Grant | undefined): Reply {
    if (!/^[0-9a-f]{64}$/.test(session)) throw new Refusal('control_session_stale', 'not a session token');
    if (!g) {
      const how = this.ended.get(session);
      if (how === 'expired') throw new Refusal('expired');
      if (how === 'ended') throw new Refusal('control_session_stale', 'the session has ended');
      throw new Refusal('fence', 'session never issued by this adapter');
    }
    // Part 2 Fence: renew and stop accept an older nonzero generation of the same session; release is exact.
    const fits = op === 'release' ? generation === g.generation : generation <= g.generation;
    if (!fits) throw new Refusal('control_session_stale', `generation ${generation} is not the grant's ${g.generation}`);
    if (op === 'renew') {
      this.extend(g);
      this.publish('grant_renewed', 'grant', this.grantEvent(g));
      return ok(op, this.grantData(g));
    }
    if (op === 'release') {
      this.end(g, 'ended');
      this.publish('grant_released', 'grant', this.grantEvent(g));
      return ok(op, this.grantData(g, true));
    }
    // stop: fenced by a new generation, drains, then the grant is revoked (part 3).
    if (!g.stopping) {
      if (this.generation < U64_MAX) g.generation = ++this.generation;
      g.stopping = true;
      g.drain = setTimeout(() => {
        if (this.grant !== g) return;
        this.end(g, 'ended');
        this.publish('grant_revoked', 'grant', this.grantEvent(g));
      }, this.options.stopDrainMs ?? STOP_DRAIN_MS);
    }
    return ok(op, this.grantData(g));
  }

  // ---- grant lifecycle ----------------------------------------------------------------------------------

  private extend(g: Grant): void {
    g.deadline = now() + BigInt(g.lease_ms) * 1_000_000n;
    clearTimeout(g.timer);
    g.timer = setTimeout(() => this.lapse(), g.lease_ms + 1);
  }

  /** The lease deadline passed: grant_expired (checked by timer and by every request). */
  private lapse(): void {
    const g = this.grant;
    if (!g || now() < g.deadline) return;
    this.end(g, 'expired');
    this.publish('grant_expired', 'grant', this.grantEvent(g));
  }

  private end(g: Grant, how: 'expired' | 'ended'): void {
    this.clearTimers(g);
    this.grant = undefined;
    this.ended.set(g.session, how);
    if (this.ended.size > 4096) this.ended.delete(this.ended.keys().next().value!);
  }

  private clearTimers(g: Grant): void {
    clearTimeout(g.timer);
    clearTimeout(g.drain);
  }

  private grantData(g: Grant, released = false): JsonObject {
    return omitEmpty({
      stopping: g.stopping && !released,
      deadline_host_ns: released ? 0n : g.deadline,
      session: released ? '' : g.session,
      generation: g.generation,
      controller: g.controller,
      binding: { ...this.binding },
      lease_ms: BigInt(g.lease_ms),
    });
  }

  private grantEvent(g: Grant): JsonObject {
    return { generation: g.generation, stopping: g.stopping }; // never the session token (part 6)
  }

  // ---- observations -------------------------------------------------------------------------------------

  private description(): JsonObject {
    return {
      backend: 'cleanroom',
      machine_sha256: this.binding.machine_sha256,
      configuration_sha256: this.binding.configuration_sha256,
      deployment_sha256: sha('cleanroom deployment'),
      binding: { ...this.binding },
      adapter_incarnation: this.adapterIncarnation,
      daemon_incarnation: this.daemonIncarnation,
      cycle_ns: CYCLE_NS,
      control_idle_timeout_ns: IDLE_TIMEOUT_NS,
      capabilities: CAPABILITIES.map(([n]) => capabilityInfo(n)),
      axes: this.axes.map((a) => ({ ...a, counts_per_unit: BigInt(a.counts_per_unit), sign: BigInt(a.sign) })),
    };
  }

  private status(): JsonObject {
    this.lapse();
    return {
      adapter_incarnation: this.adapterIncarnation,
      daemon_incarnation: this.daemonIncarnation,
      core: { armed: 0n, home_valid_mask: 0n, safety_fault_mask: 0n, home_epoch: 0n },
      commissioning_phase: 'idle',
      axes: this.axes.map((a) => ({ id: a.id, ready: false })),
      execution: { handles: [], generation: 0n, state: '', segment: 0n, native_sequence: 0n },
    };
  }

  // ---- events (part 6) ----------------------------------------------------------------------------------

  private publish(type: string, field: string, payload: JsonObject): void {
    const e: JsonObject = { sequence: this.nextSequence++, time_ns: now(), type, daemon_incarnation: this.daemonIncarnation, adapter_incarnation: this.adapterIncarnation, [field]: payload };
    this.events.push(e);
    if (this.events.length > EVENT_RING) this.events.shift();
    for (const s of this.streams) s.write(sse(e));
  }

  /** The cursor of `?after=`: absent is 0; otherwise exactly one run of decimal digits within uint64. */
  private cursor(url: URL): bigint {
    const all = url.searchParams.getAll('after');
    if (all.length === 0) return 0n;
    if (all.length > 1 || !/^[0-9]{1,20}$/.test(all[0]!) || BigInt(all[0]!) > U64_MAX) throw new Refusal('invalid_event_cursor', 'after must be one unsigned decimal number');
    const after = BigInt(all[0]!);
    if (after > this.nextSequence - 1n) throw new Refusal('event_cursor_ahead', `after ${after} is newer than the log`);
    return after;
  }

  /** Events after the cursor, led by a synthetic events_dropped when the ring no longer holds the next one. */
  private after(after: bigint): JsonObject[] {
    const oldest = (this.events[0]?.sequence as bigint | undefined) ?? this.nextSequence;
    const out: JsonObject[] = [];
    if (after > 0n && after + 1n < oldest) {
      const last = oldest - 1n;
      out.push({ sequence: last, time_ns: now(), type: 'events_dropped', daemon_incarnation: this.daemonIncarnation, adapter_incarnation: this.adapterIncarnation, events_dropped: { first_lost_sequence: after + 1n, last_lost_sequence: last } });
    }
    return out.concat(this.events.filter((e) => (e.sequence as bigint) > after));
  }

  private poll(url: URL): Reply {
    let after: bigint;
    try {
      after = this.cursor(url);
    } catch (e) {
      if (e instanceof Refusal) return refusal('subscribe_events', e);
      throw e;
    }
    const batch = this.after(after).slice(0, EVENTS_PER_POLL);
    const next = batch.length ? (batch[batch.length - 1]!.sequence as bigint) : after;
    return ok('subscribe_events', { records: batch, next_sequence: next, latest_sequence: this.nextSequence - 1n });
  }

  private stream(url: URL, res: ServerResponse): void {
    let after: bigint;
    try {
      after = this.cursor(url);
    } catch (e) {
      if (e instanceof Refusal) return this.send(res, refusal('subscribe_events', e));
      throw e;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const e of this.after(after)) res.write(sse(e));
    this.streams.add(res);
    res.on('close', () => this.streams.delete(res));
  }
}

/** Whether the body begins with one complete JSON value (the bytes up to some `}` decode alone). */
function completeObjectBefore(body: Buffer): boolean {
  for (let i = body.indexOf(0x7d); i >= 0; i = body.indexOf(0x7d, i + 1)) {
    try {
      parseExact(body.subarray(0, i + 1));
      return true;
    } catch {
      /* not yet the end of the value */
    }
  }
  return false;
}

function sse(e: JsonObject): string {
  return `id: ${e.sequence}\nevent: ${e.type}\ndata: ${stringifyExact(e)}\n\n`;
}

function omitEmpty(o: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(o)) if (v !== 0n && v !== '' && v !== false && v !== null) out[k] = v;
  return out;
}

function ok(operation: string, data: JsonObject): Reply {
  return { status: 200, body: { schema: RESPONSE_SCHEMA, operation, data } };
}

function refusal(operation: string, r: Refusal): Reply {
  const body: JsonObject = { schema: RESPONSE_SCHEMA, operation };
  if (r.data) body.data = r.data;
  body.error = r.detail ? `${r.label}: ${r.detail}` : r.label;
  return { status: r.status, body };
}

function unimplemented(name: string): Reply {
  return refusal(name, new Refusal('capability_unimplemented', '', capabilityInfo(name)));
}

/**
 * `hil cleanroom serve`: start, print one ready line, stop on SIGINT/SIGTERM or when stdin closes. A remote
 * listener whose files fail a check of part 5 item 6, or a process whose TLS would send session tickets
 * (harness/cleanroom/remote.ts), does not start: one line on stderr and exit status 2.
 */
export async function serveCleanroom(o: CleanroomOptions & { lifelineStdin?: boolean }): Promise<number> {
  let svc: CleanroomService;
  try {
    svc = new CleanroomService(o);
    if (o.remote) {
      const { cert, key } = loadCredentials(o.remote.files).tls;
      if (!(await ticketsDisabled({ cert, key }))) throw new CredentialError(`this process's TLS sends session tickets (part 5 item 5): run node with --openssl-config=${NO_TICKETS_CNF}`);
    }
  } catch (e) {
    if (!(e instanceof CredentialError)) throw e;
    process.stderr.write(`hil cleanroom serve: cannot start: ${e.message}\n`);
    return 2;
  }
  await svc.listen();
  process.stdout.write(`ready ${JSON.stringify({ control: svc.socketPath, public: join(o.socketDir, 'public', 'control.sock'), remote: svc.remoteAddress ?? '', pid: process.pid, backend: 'cleanroom' })}\n`);
  return new Promise((resolve) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      void svc.close().then(() => resolve(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    if (o.lifelineStdin) {
      process.stdin.on('end', stop).on('close', stop).resume();
    }
  });
}
