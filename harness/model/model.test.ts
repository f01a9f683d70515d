// The model's composition (harness/model/model.ts): the rules are the union of each state machine's own,
// and every wrong-model variant changes some rule. Each machine's own tests sit beside it
// (harness/model/machines/*.test.ts).

import { describe, expect, test } from 'vitest';
import { REFERENCE_RULES } from './model.ts';
import { GRANT_RULES } from './machines/grant.ts';
import { HANDLE_RULES } from './machines/handles.ts';
import { IO_RULES } from './machines/io.ts';
import { JOG_RULES } from './machines/jog.ts';
import { OPERATION_RULES } from './machines/operations.ts';
import { PROGRAM_RULES } from './machines/programs.ts';
import { CACHE_RULES } from './machines/request-cache.ts';
import { START_GATE_RULES } from './machines/start-gate.ts';
import { WRONG_MODELS, rulesOf } from './variants.ts';

describe('rules', () => {
  test('each rule belongs to exactly one state machine, and the reference rules are all of them, each on', () => {
    const parts = [GRANT_RULES, CACHE_RULES, HANDLE_RULES, START_GATE_RULES, IO_RULES, JOG_RULES, PROGRAM_RULES, OPERATION_RULES];
    const names = parts.flatMap((p) => Object.keys(p));
    expect(new Set(names).size).toBe(names.length);
    expect(names.sort()).toEqual(Object.keys(REFERENCE_RULES).sort());
    expect(Object.values(REFERENCE_RULES).every((v) => v === true)).toBe(true);
  });
});

describe('wrong-model variants (harness/model/variants.ts)', () => {
  test('each names a rule that exists and differs from the reference', () => {
    for (const w of WRONG_MODELS) {
      const r = rulesOf(w);
      const changed = Object.keys(w.patch).filter((k) => k in REFERENCE_RULES && r[k as keyof typeof r] !== REFERENCE_RULES[k as keyof typeof r]);
      expect(changed.length, w.name).toBeGreaterThan(0);
      expect(w.skip !== undefined || w.covers.length > 0, `${w.name} covers something unless skipped`).toBe(true);
    }
  });
});
