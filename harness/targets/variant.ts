// Target variants: a suite that needs a specially started system (capture off, a generation counter near
// its end, another machine, a bring-up fault, a chosen socket path, an anchor store shared between two
// stacks or one that cannot be used) states what it needs as typed options, and the target decides how
// to provide it, or says why it cannot (then the test skips with that reason). Only harness/targets/
// knows the reference stack's flags and environment; suites never do.
//
// Options are validated loudly before any target sees them (the wptrunner habit for product
// descriptors): a malformed option is a suite bug, HIL_ERR_VARIANT_INVALID, on every target.

import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HarnessError } from '../errors.ts';

const MACHINES = fileURLToPath(new URL('../../fixtures/machines/', import.meta.url));
const U64_MAX = (1n << 64n) - 1n;
/** sockaddr_un.sun_path holds 108 bytes on Linux, including the terminating NUL. */
const SUN_PATH_MAX = 107;

/** Faults a variant can have present at bring-up, before the first cycle. */
export type BringUpFault = { kind: 'pdo_mapping_mismatch'; axis: number };

export type AnchorStore =
  /** Anchors live in this directory (two variants given the same directory share their anchors). */
  | { kind: 'directory'; dir: string }
  /** A store that can be neither written nor read (anchor_store_io). */
  | { kind: 'unusable' };

export interface VariantOptions {
  /** 'off': the cell has no telemetry capture ring (document 1 part 7 telemetry_unavailable). */
  telemetry?: 'off';
  /** The application generation counter starts at this uint64 (document 1 part 4 acquire). */
  initialGeneration?: bigint;
  /** Another machine configuration: a name under fixtures/machines/ ('bench-two-axis') or an absolute path. */
  machine?: string;
  /** The binding's pair id. */
  pairId?: string;
  /** The binding's pair revision (a nonzero uint64; the reference stack's default is 1). */
  pairRevision?: bigint;
  /** The control socket at this absolute path instead of the socket directory's control.sock. */
  controlSocket?: string;
  anchorStore?: AnchorStore;
  bringUpFaults?: readonly BringUpFault[];
  /** 'stepped': no cycle runs unless the test asks (`target.step(n)`), so "right after" is exact. */
  clock?: 'stepped';
  /** How long an arm waits for enabled axes to reach operation enabled (docs/profile.md, arm), in ms. */
  armSettleMs?: number;
  /** 'off': no jog datagram socket, hence no independent jog lane (document 1 part 4 independent_jog_unavailable). */
  jogSocket?: 'off';
  /** A native Home takes this long on the simulated drives, in ms of the cell's clock (simulator only). */
  homingMs?: number;
  /** The control socket closes a connection idle this long, in ms (Describe control_idle_timeout_ns). */
  controlIdleTimeoutMs?: number;
}

type Check = (v: unknown) => string | undefined;
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const axisOk = (a: unknown) => Number.isSafeInteger(a) && (a as number) >= 0 && (a as number) < 64;

/** One validator per option: the table is the whole vocabulary of variants. */
const CHECKS: Record<keyof VariantOptions, Check> = {
  telemetry: (v) => (v === 'off' ? undefined : "must be 'off'"),
  initialGeneration: (v) => (typeof v === 'bigint' && v >= 0n && v <= U64_MAX ? undefined : 'must be a bigint in 0..2^64-1'),
  machine: (v) => {
    if (typeof v !== 'string' || v === '') return 'must be a fixture name or an absolute path';
    const file = machineFile(v);
    return existsSync(file) && statSync(file).isFile() ? undefined : `no machine configuration at ${file}`;
  },
  pairId: (v) => (typeof v === 'string' && /^[\x21-\x7e]{1,128}$/.test(v) ? undefined : 'must be 1..128 printable ASCII characters'),
  pairRevision: (v) => (typeof v === 'bigint' && v >= 1n && v <= U64_MAX ? undefined : 'must be a bigint in 1..2^64-1'),
  controlSocket: (v) => {
    if (typeof v !== 'string' || !isAbsolute(v)) return 'must be an absolute path';
    return Buffer.byteLength(v) <= SUN_PATH_MAX ? undefined : `is longer than a Unix socket path can be (${SUN_PATH_MAX} bytes)`;
  },
  anchorStore: (v) => {
    if (!isObj(v)) return "must be {kind: 'directory', dir} or {kind: 'unusable'}";
    if (v.kind === 'unusable') return Object.keys(v).length === 1 ? undefined : "{kind: 'unusable'} takes no other field";
    if (v.kind === 'directory') return typeof v.dir === 'string' && isAbsolute(v.dir) && Object.keys(v).length === 2 ? undefined : "{kind: 'directory'} needs an absolute dir and nothing else";
    return `unknown kind ${JSON.stringify(v.kind)}`;
  },
  bringUpFaults: (v) => {
    if (!Array.isArray(v) || v.length === 0) return 'must be a non-empty array';
    for (const f of v) {
      if (!isObj(f) || f.kind !== 'pdo_mapping_mismatch' || !axisOk(f.axis) || Object.keys(f).length !== 2) {
        return `entry ${JSON.stringify(f, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x))} is not {kind: 'pdo_mapping_mismatch', axis: 0..63}`;
      }
    }
    return undefined;
  },
  clock: (v) => (v === 'stepped' ? undefined : "must be 'stepped'"),
  armSettleMs: (v) => (Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= 999_999 ? undefined : 'must be an integer 0..999999'),
  jogSocket: (v) => (v === 'off' ? undefined : "must be 'off'"),
  homingMs: (v) => (Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= 3_600_000 ? undefined : 'must be an integer 1..3600000'),
  controlIdleTimeoutMs: (v) => (Number.isSafeInteger(v) && (v as number) >= 100 && (v as number) <= 3_600_000 ? undefined : 'must be an integer 100..3600000'),
};

/** Validate variant options; every problem is listed in one HIL_ERR_VARIANT_INVALID. */
export function parseVariant(options: unknown): VariantOptions {
  if (!isObj(options)) throw new HarnessError('HIL_ERR_VARIANT_INVALID', 'variant options must be an object');
  const problems: string[] = [];
  for (const [k, v] of Object.entries(options)) {
    const check = CHECKS[k as keyof VariantOptions];
    if (!check) problems.push(`${k}: not a variant option (known: ${Object.keys(CHECKS).join(', ')})`);
    else if (v !== undefined) {
      const p = check(v);
      if (p) problems.push(`${k}: ${p}`);
    }
  }
  if (Object.values(options).every((v) => v === undefined)) problems.push('a variant needs at least one option (use the file target otherwise)');
  if (problems.length) throw new HarnessError('HIL_ERR_VARIANT_INVALID', `malformed variant options:\n  ${problems.join('\n  ')}`);
  return options as VariantOptions;
}

export function machineFile(machine: string): string {
  return isAbsolute(machine) ? machine : join(MACHINES, `${machine}.json`);
}

/** The options in words, for skip reasons and diagnostics. */
export function describeVariant(o: VariantOptions): string {
  const parts: string[] = [];
  if (o.telemetry === 'off') parts.push('telemetry capture off');
  if (o.initialGeneration !== undefined) parts.push(`generation counter starting at ${o.initialGeneration}`);
  if (o.machine !== undefined) parts.push(`machine ${o.machine}`);
  if (o.pairId !== undefined) parts.push(`pair id ${o.pairId}`);
  if (o.pairRevision !== undefined) parts.push(`pair revision ${o.pairRevision}`);
  if (o.controlSocket !== undefined) parts.push('control socket at a chosen path');
  if (o.anchorStore?.kind === 'directory') parts.push('anchor store in a chosen directory');
  if (o.anchorStore?.kind === 'unusable') parts.push('an anchor store that cannot be used');
  for (const f of o.bringUpFaults ?? []) parts.push(`${f.kind} on axis ${f.axis} at bring-up`);
  if (o.clock === 'stepped') parts.push('the stepped clock');
  if (o.armSettleMs !== undefined) parts.push(`an arm settle bound of ${o.armSettleMs} ms`);
  if (o.jogSocket === 'off') parts.push('no jog datagram socket');
  if (o.homingMs !== undefined) parts.push(`a simulated Home lasting ${o.homingMs} ms`);
  if (o.controlIdleTimeoutMs !== undefined) parts.push(`a control idle timeout of ${o.controlIdleTimeoutMs} ms`);
  return parts.join(', ');
}
