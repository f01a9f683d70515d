// The generated machine configurations (harness/machine-gen.ts) are valid: the configuration compiler
// (document 3 part 2, run as a process) accepts every one of a batch drawn by fast-check, the draws cover
// 1 and 16 axes and both axis types, and a seed always gives the same bytes.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, test } from 'vitest';
import { compileMany, isRefused } from './clients/config.ts';
import { generateMachine } from './machine-gen.ts';

const dir = mkdtempSync(join(tmpdir(), 'hil-machine-gen-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('generated machine configurations', () => {
  test('the compiler accepts every generated machine (a batch of seeds, 1 and 16 axes among them)', async () => {
    const seeds = fc.sample(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { numRuns: 24, seed: 2511 });
    const machines = [...seeds.map((s) => generateMachine(s)), generateMachine(1, { axes: 1 }), generateMachine(2, { axes: 16 })];
    const files = machines.map((m, i) => {
      const f = join(dir, `m${i}.json`);
      writeFileSync(f, JSON.stringify(m.config, null, 2));
      return f;
    });
    const out = await compileMany(files, join(dir, 'out'));
    const refused = out.map((o, i) => (isRefused(o) ? `${machines[i]!.summary}: ${o.error} at ${o.path}: ${o.message}` : '')).filter(Boolean);
    expect(refused).toEqual([]);
    const types = new Set(machines.flatMap((m) => (m.config.axes as Array<{ type: string }>).map((a) => a.type)));
    expect([...types].sort()).toEqual(['linear', 'rotary']);
    const counts = machines.map((m) => (m.config.axes as unknown[]).length);
    expect(Math.min(...counts)).toBe(1);
    expect(Math.max(...counts)).toBe(16);
  }, 120_000);

  test('a seed is the whole recipe: the same seed gives the same configuration, another seed another', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        expect(JSON.stringify(generateMachine(seed).config)).toBe(JSON.stringify(generateMachine(seed).config));
        expect(JSON.stringify(generateMachine(seed).config)).not.toBe(JSON.stringify(generateMachine(seed + 1).config));
      }),
      { numRuns: 50 },
    );
  });
});
