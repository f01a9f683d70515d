// The bench box line protocol (docs/benchbox.md), as pure, table-driven functions: formatting requests,
// parsing reply and event lines. No I/O here; the client (client.ts) and the simulated box (simbox.ts) use it.
//
//   host -> box:  <id> <VERB> [ARG ...]\n          id: 1..65535, decimal
//   box -> host:  <id> OK [key=value ...]\n        or  <id> ERR <code> [text]\n
//                 * <EVENT> [key=value ...]\n      unsolicited (BOOT, ESTOP)
// Lines are ASCII, at most 128 bytes before the newline; a carriage return before the newline is ignored.

export const PROTOCOL_VERSION = 1;
export const MAX_LINE = 128;

/** Requests and their argument forms. */
export const VERBS = {
  HELLO: [],
  STATUS: [],
  RELAY: ['OPEN', 'CLOSE'],
  POWER: ['CUT', 'RESTORE'],
  OUTPUTS: [],
  INPUTS: ['<mask>', '<value>'],
  HB: [],
  TIMEOUT: ['<ms>'],
} as const;

export type Verb = keyof typeof VERBS;

export type Request =
  | { verb: 'HELLO' }
  | { verb: 'STATUS' }
  | { verb: 'RELAY'; state: 'OPEN' | 'CLOSE' }
  | { verb: 'POWER'; state: 'CUT' | 'RESTORE' }
  | { verb: 'OUTPUTS' }
  | { verb: 'INPUTS'; mask: number; value: number }
  | { verb: 'HB' }
  | { verb: 'TIMEOUT'; ms: number };

/** Error codes a box answers with (`<id> ERR <code> ...`). */
export const BOX_ERRORS = ['bad_command', 'bad_argument', 'line_too_long', 'hb_not_armed', 'power_with_chain_open'] as const;

export type Reply =
  | { kind: 'ok'; id: number; fields: Record<string, string> }
  | { kind: 'err'; id: number; code: string; text: string }
  | { kind: 'event'; event: string; fields: Record<string, string> };

/** Why a line from the box is not a protocol line (the client reports BENCH_MALFORMED with it). */
export class LineError extends Error {
  constructor(
    readonly code: 'line_too_long' | 'not_ascii' | 'bad_id' | 'bad_status' | 'bad_field' | 'empty',
    message: string,
  ) {
    super(message);
    this.name = 'LineError';
  }
}

const HEX16 = /^0x[0-9a-f]{4}$/;
const ID = /^(?:[1-9][0-9]{0,4})$/;
const KEY = /^[a-z][a-z0-9_]{0,31}$/;
const VALUE = /^[\x21-\x7e]{1,64}$/;

export function formatRequest(id: number, r: Request): string {
  if (!(Number.isInteger(id) && id >= 1 && id <= 65535)) throw new RangeError(`request id ${id} outside 1..65535`);
  switch (r.verb) {
    case 'RELAY':
    case 'POWER':
      return `${id} ${r.verb} ${r.state}\n`;
    case 'INPUTS':
      return `${id} INPUTS ${hex16(r.mask)} ${hex16(r.value)}\n`;
    case 'TIMEOUT':
      return `${id} TIMEOUT ${r.ms}\n`;
    default:
      return `${id} ${r.verb}\n`;
  }
}

export function hex16(v: number): string {
  if (!(Number.isInteger(v) && v >= 0 && v <= 0xffff)) throw new RangeError(`${v} is not a 16-bit value`);
  return `0x${v.toString(16).padStart(4, '0')}`;
}

export function parseHex16(s: string | undefined): number | undefined {
  return s !== undefined && HEX16.test(s) ? Number.parseInt(s.slice(2), 16) : undefined;
}

function fieldsOf(tokens: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of tokens) {
    const eq = t.indexOf('=');
    const k = eq > 0 ? t.slice(0, eq) : '';
    const v = eq > 0 ? t.slice(eq + 1) : '';
    if (!KEY.test(k) || !VALUE.test(v)) throw new LineError('bad_field', `field ${JSON.stringify(t)} is not key=value`);
    if (Object.hasOwn(out, k)) throw new LineError('bad_field', `field ${k} twice`);
    out[k] = v;
  }
  return out;
}

/** Parses one line from the box (without its newline). Throws LineError. */
export function parseReply(line: string): Reply {
  const l = line.endsWith('\r') ? line.slice(0, -1) : line;
  if (l.length > MAX_LINE) throw new LineError('line_too_long', `line of ${l.length} bytes (at most ${MAX_LINE})`);
  if (!/^[\x20-\x7e]*$/.test(l)) throw new LineError('not_ascii', 'line holds bytes outside printable ASCII');
  if (l.length === 0) throw new LineError('empty', 'empty line');
  const tokens = l.split(' ');
  if (tokens.some((t) => t === '')) throw new LineError('bad_field', 'tokens are separated by exactly one space');
  const [head, status, ...rest] = tokens;
  if (head === '*') {
    if (!status || !/^[A-Z]{2,16}$/.test(status)) throw new LineError('bad_status', `event name ${JSON.stringify(status)}`);
    return { kind: 'event', event: status, fields: fieldsOf(rest) };
  }
  if (!ID.test(head!) || Number(head) > 65535) throw new LineError('bad_id', `reply id ${JSON.stringify(head)}`);
  const id = Number(head);
  if (status === 'OK') return { kind: 'ok', id, fields: fieldsOf(rest) };
  if (status === 'ERR') {
    const [code, ...text] = rest;
    if (!code || !/^[a-z_]{1,32}$/.test(code)) throw new LineError('bad_status', `error code ${JSON.stringify(code)}`);
    return { kind: 'err', id, code, text: text.join(' ') };
  }
  throw new LineError('bad_status', `status ${JSON.stringify(status)} (OK or ERR)`);
}

/** Parses one request line at the box side; returns the request or the ERR code and text to answer. */
export function parseRequest(line: string): { id: number; req: Request } | { id: number; code: (typeof BOX_ERRORS)[number]; text: string } | null {
  const l = line.endsWith('\r') ? line.slice(0, -1) : line;
  const tokens = l.split(' ');
  const head = tokens[0] ?? '';
  const id = ID.test(head) && Number(head) <= 65535 ? Number(head) : 0;
  if (id === 0) return null; // nothing to answer to: the host sees a silent box and times out
  if (l.length > MAX_LINE) return { id, code: 'line_too_long', text: `at most ${MAX_LINE} bytes` };
  const verb = tokens[1] as Verb | undefined;
  const args = tokens.slice(2);
  const bad = (text: string) => ({ id, code: 'bad_argument' as const, text });
  switch (verb) {
    case 'HELLO':
    case 'STATUS':
    case 'OUTPUTS':
    case 'HB':
      return args.length ? bad(`${verb} takes no argument`) : { id, req: { verb } };
    case 'RELAY':
      return args.length === 1 && (args[0] === 'OPEN' || args[0] === 'CLOSE') ? { id, req: { verb, state: args[0] } } : bad('RELAY OPEN|CLOSE');
    case 'POWER':
      return args.length === 1 && (args[0] === 'CUT' || args[0] === 'RESTORE') ? { id, req: { verb, state: args[0] } } : bad('POWER CUT|RESTORE');
    case 'INPUTS': {
      const mask = parseHex16(args[0]);
      const value = parseHex16(args[1]);
      return args.length === 2 && mask !== undefined && value !== undefined ? { id, req: { verb, mask, value } } : bad('INPUTS 0xMMMM 0xVVVV');
    }
    case 'TIMEOUT': {
      const ms = /^[1-9][0-9]{0,4}$/.test(args[0] ?? '') ? Number(args[0]) : 0;
      return args.length === 1 && ms >= 100 && ms <= 10000 ? { id, req: { verb, ms } } : bad('TIMEOUT 100..10000');
    }
    default:
      return { id, code: 'bad_command', text: `unknown verb ${JSON.stringify(verb ?? '')}` };
  }
}

/** What STATUS reports, decoded. */
export interface BoxStatus {
  /** The E-stop chain as the box reads it back (its relay and every button in series). */
  chain: 'closed' | 'open';
  relay: 'closed' | 'open';
  power: 'on' | 'off';
  heartbeat: 'idle' | 'armed' | 'expired';
  timeoutMs: number;
  outputs: number;
  inputs: number;
  uptimeMs: number;
}

/** Decodes the fields of a STATUS reply; undefined names the first field that is missing or malformed. */
export function decodeStatus(f: Record<string, string>): BoxStatus | { bad: string } {
  const one = <T extends string>(k: string, allowed: readonly T[]): T | undefined => (allowed.includes(f[k] as T) ? (f[k] as T) : undefined);
  const int = (k: string) => (/^(0|[1-9][0-9]{0,9})$/.test(f[k] ?? '') ? Number(f[k]) : undefined);
  const chain = one('chain', ['closed', 'open'] as const);
  const relay = one('relay', ['closed', 'open'] as const);
  const power = one('power', ['on', 'off'] as const);
  const heartbeat = one('hb', ['idle', 'armed', 'expired'] as const);
  const timeoutMs = int('timeout_ms');
  const outputs = parseHex16(f.outputs);
  const inputs = parseHex16(f.inputs);
  const uptimeMs = int('uptime_ms');
  for (const [k, v] of Object.entries({ chain, relay, power, hb: heartbeat, timeout_ms: timeoutMs, outputs, inputs, uptime_ms: uptimeMs })) if (v === undefined) return { bad: k };
  return { chain: chain!, relay: relay!, power: power!, heartbeat: heartbeat!, timeoutMs: timeoutMs!, outputs: outputs!, inputs: inputs!, uptimeMs: uptimeMs! };
}
