// Target variants: options are validated loudly on every target, the sim target maps each option to the
// reference stack's flags and environment, and the external target refuses every variant with a reason
// that names what it cannot provide (the test then skips with that reason, never silently).

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { codeOfAsync, HarnessError } from '../errors.ts';
import { openVariantOrSkip } from '../fixture.ts';
import { TARGETS, variantsFromEnv } from './index.ts';
import { ANCHOR_DIR_ENV } from './reference.ts';
import { variantStart } from './sim.ts';
import type { Target } from './types.ts';
import { describeVariant, machineFile, parseVariant, type VariantOptions } from './variant.ts';

const codeOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    if (e instanceof HarnessError) return e.code;
    throw e;
  }
  return 'no error';
};

describe('parseVariant', () => {
  const VALID: VariantOptions[] = [
    { telemetry: 'off' },
    { initialGeneration: 0n },
    { initialGeneration: (1n << 64n) - 1n },
    { machine: 'bench-two-axis' },
    { machine: machineFile('nine-axis') },
    { pairId: 'cell-a' },
    { pairRevision: 1n },
    { pairRevision: (1n << 64n) - 1n },
    { controlSocket: '/tmp/x/cell.sock' },
    { anchorStore: { kind: 'unusable' } },
    { anchorStore: { kind: 'directory', dir: '/tmp/anchors' } },
    { bringUpFaults: [{ kind: 'pdo_mapping_mismatch', axis: 0 }, { kind: 'pdo_mapping_mismatch', axis: 63 }] },
    { clock: 'stepped', armSettleMs: 0 },
    { armSettleMs: 999_999 },
    { homingMs: 1 },
    { homingMs: 3_600_000, controlIdleTimeoutMs: 100 },
    { controlIdleTimeoutMs: 3_600_000 },
    { pairId: 'cell-b', anchorStore: { kind: 'directory', dir: '/tmp/anchors' }, telemetry: 'off' },
  ];
  test.each(VALID.map((o) => ({ o, text: describeVariant(o) })))('accepts $text', ({ o }) => {
    expect(parseVariant(o)).toBe(o);
  });

  const INVALID: Array<[string, unknown, RegExp]> = [
    ['not an object', 'telemetry off', /must be an object/],
    ['no option at all', {}, /at least one option/],
    ['an unknown option', { capture: false }, /capture: not a variant option/],
    ['telemetry other than off', { telemetry: 'on' }, /telemetry: must be 'off'/],
    ['a generation as a number', { initialGeneration: 5 }, /initialGeneration: must be a bigint/],
    ['a generation past 2^64-1', { initialGeneration: 1n << 64n }, /initialGeneration/],
    ['a negative generation', { initialGeneration: -1n }, /initialGeneration/],
    ['a machine that does not exist', { machine: 'no-such-machine' }, /no machine configuration at .*no-such-machine\.json/],
    ['an empty pair id', { pairId: '' }, /pairId/],
    ['a pair id with a space', { pairId: 'cell a' }, /pairId/],
    ['a pair revision of 0', { pairRevision: 0n }, /pairRevision: must be a bigint in 1/],
    ['a pair revision as a number', { pairRevision: 5 }, /pairRevision/],
    ['a pair revision past 2^64-1', { pairRevision: 1n << 64n }, /pairRevision/],
    ['a relative socket path', { controlSocket: 'cell.sock' }, /controlSocket: must be an absolute path/],
    ['a socket path longer than sun_path', { controlSocket: '/' + 'x'.repeat(107) }, /longer than a Unix socket path/],
    ['an anchor store of unknown kind', { anchorStore: { kind: 'tmpfs' } }, /anchorStore: unknown kind/],
    ['a relative anchor directory', { anchorStore: { kind: 'directory', dir: 'anchors' } }, /anchorStore/],
    ['an unusable store with a dir', { anchorStore: { kind: 'unusable', dir: '/x' } }, /takes no other field/],
    ['no bring-up faults', { bringUpFaults: [] }, /non-empty/],
    ['a bring-up fault of unknown kind', { bringUpFaults: [{ kind: 'estop', axis: 1 }] }, /bringUpFaults: entry/],
    ['a clock other than stepped', { clock: 'fast' }, /clock: must be 'stepped'/],
    ['a negative arm settle bound', { armSettleMs: -1 }, /armSettleMs/],
    ['an arm settle bound past 999999', { armSettleMs: 1_000_000 }, /armSettleMs/],
    ['a zero homing time', { homingMs: 0 }, /homingMs/],
    ['a homing time past an hour', { homingMs: 3_600_001 }, /homingMs/],
    ['a fractional homing time', { homingMs: 1.5 }, /homingMs/],
    ['an idle timeout under 100 ms', { controlIdleTimeoutMs: 99 }, /controlIdleTimeoutMs/],
    ['an idle timeout past an hour', { controlIdleTimeoutMs: 3_600_001 }, /controlIdleTimeoutMs/],
    ['a bring-up fault on axis 64', { bringUpFaults: [{ kind: 'pdo_mapping_mismatch', axis: 64 }] }, /bringUpFaults/],
  ];
  test.each(INVALID)('refuses %s with HIL_ERR_VARIANT_INVALID', (_row, o, message) => {
    expect(codeOf(() => parseVariant(o))).toBe('HIL_ERR_VARIANT_INVALID');
    expect(() => parseVariant(o)).toThrow(message);
  });

  test('every problem is listed at once', () => {
    expect(() => parseVariant({ telemetry: 'on', pairId: '', bogus: 1 })).toThrow(/telemetry[\s\S]*pairId[\s\S]*bogus/);
  });
});

describe('the sim target maps options to the reference stack', () => {
  test('flags, one per option', () => {
    const s = variantStart({
      telemetry: 'off',
      initialGeneration: 18446744073709551614n,
      machine: 'bench-two-axis',
      pairId: 'cell-a',
      controlSocket: '/tmp/x/a.sock',
      bringUpFaults: [{ kind: 'pdo_mapping_mismatch', axis: 3 }],
      clock: 'stepped',
      armSettleMs: 0,
      homingMs: 600_000,
      controlIdleTimeoutMs: 1_500,
    });
    expect(s.args).toEqual([
      '--capture-retention-ms', '0',
      '--initial-generation', '18446744073709551614',
      '--machine', machineFile('bench-two-axis'),
      '--pair-id', 'cell-a',
      '--socket', '/tmp/x/a.sock',
      '--sim-fault', 'pdo_mapping_mismatch:3',
      '--clock', 'stepped',
      '--arm-settle-ms', '0',
      '--sim-homing-ms', '600000',
      '--control-idle-timeout-ms', '1500',
    ]);
    expect(s.env).toBeUndefined();
  });

  test('anchor stores: a chosen directory, or a path below a regular file', async () => {
    expect(await variantStart({ anchorStore: { kind: 'directory', dir: '/tmp/shared' } }).env!('/tmp/stack')).toEqual({ [ANCHOR_DIR_ENV]: '/tmp/shared' });
    const dir = await mkdtemp(join(tmpdir(), 'hil-variant-'));
    try {
      const env = await variantStart({ anchorStore: { kind: 'unusable' } }).env!(dir);
      expect(env).toEqual({ [ANCHOR_DIR_ENV]: join(dir, 'not-a-directory', 'anchors') });
      await expect(mkdtemp(join(dir, 'not-a-directory', 'x'))).rejects.toMatchObject({ code: 'ENOTDIR' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('provides every variant', () => {
    expect(TARGETS.sim.cannotProvide({ telemetry: 'off' }, {})).toBeUndefined();
  });
});

describe('the external target cannot provide variants, and says which', () => {
  const env = { HIL_TARGET: 'external', HIL_SOCKET: '/nonexistent/control.sock' };

  test('the reason names the options', () => {
    const v = variantsFromEnv(env);
    expect(v.cannotProvide({ telemetry: 'off' })).toBe('target external cannot provide a stack with telemetry capture off: it reaches a service someone else started');
    expect(v.cannotProvide({ pairId: 'cell-a', bringUpFaults: [{ kind: 'pdo_mapping_mismatch', axis: 3 }] })).toMatch(/pair id cell-a, pdo_mapping_mismatch on axis 3 at bring-up/);
  });

  test('opening one anyway is HIL_ERR_VARIANT_UNSUPPORTED; malformed options stay HIL_ERR_VARIANT_INVALID', async () => {
    const v = variantsFromEnv(env);
    expect(await codeOfAsync(() => v.open({ telemetry: 'off' }))).toBe('HIL_ERR_VARIANT_UNSUPPORTED');
    expect(codeOf(() => v.cannotProvide({ telemetry: 'on' } as unknown as VariantOptions))).toBe('HIL_ERR_VARIANT_INVALID');
    expect(await codeOfAsync(() => TARGETS.external.openVariant({ bogus: 1 } as unknown as VariantOptions, {}))).toBe('HIL_ERR_VARIANT_INVALID');
  });

  test('the variant fixture skips with that reason and opens nothing', async () => {
    const opened: Target[] = [];
    const notes: string[] = [];
    const skip = (note: string): never => {
      notes.push(note);
      throw new Error('skipped');
    };
    await expect(openVariantOrSkip(variantsFromEnv(env), { initialGeneration: 7n }, skip, opened)).rejects.toThrow('skipped');
    expect(notes).toEqual(['target external cannot provide a stack with generation counter starting at 7: it reaches a service someone else started']);
    expect(opened).toEqual([]);
  });
});

test('an unknown target is HIL_ERR_TARGET_UNKNOWN', () => {
  expect(codeOf(() => variantsFromEnv({ HIL_TARGET: 'rig9' }))).toBe('HIL_ERR_TARGET_UNKNOWN');
});
