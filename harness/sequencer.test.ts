// The longest-first order of conformance files (harness/sequencer.ts).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { QUIET_FILES, SOLO_FILES } from '../vitest.config.ts';
import { DURATION_MS, longestFirst } from './sequencer.ts';

const ROOT = join(import.meta.dirname, '..');

test('every file with a duration figure exists, and every quiet or solo file is a suite file', () => {
  for (const f of [...Object.keys(DURATION_MS), ...QUIET_FILES, ...SOLO_FILES]) expect(existsSync(join(ROOT, f)), f).toBe(true);
});

test('within a project the heaviest file comes first, unknown files after in the order vitest gave; projects keep their order', () => {
  const project = (name: string) => ({ name, config: { root: ROOT, sequence: { groupOrder: name === 'b' ? 2 : 1 } } });
  const a = project('a');
  const b = project('b');
  const spec = (p: ReturnType<typeof project>, f: string) => ({ project: p, moduleId: join(ROOT, f) });
  // vitest's order: projects contiguous, files in any order within them
  const files = [
    spec(a, 'suites/grant/grant.test.ts'),
    spec(a, 'suites/events/other.test.ts'),
    spec(a, 'suites/planner/cancel.test.ts'),
    spec(a, 'suites/remote/timeouts.test.ts'),
    spec(b, 'suites/jog/jog.test.ts'),
    spec(b, 'suites/observation/keepalive.test.ts'),
  ];
  const out = longestFirst(files);
  expect(out.map((s) => `${s.project.name}:${s.moduleId.slice(ROOT.length + 1)}`)).toEqual([
    'a:suites/remote/timeouts.test.ts',
    'a:suites/planner/cancel.test.ts',
    'a:suites/grant/grant.test.ts',
    'a:suites/events/other.test.ts',
    'b:suites/observation/keepalive.test.ts',
    'b:suites/jog/jog.test.ts',
  ]);
});
