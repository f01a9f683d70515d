// The order in which conformance files go to the shared pool (harness/sequencer.ts).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { DURATION_MS, JOG_FILES, LAST_FILES, longestFirst, QUIET_FILES } from './sequencer.ts';

const ROOT = join(import.meta.dirname, '..');

test('every file with a duration figure exists, and every quiet, jog or last file is a suite file', () => {
  for (const f of [...Object.keys(DURATION_MS), ...QUIET_FILES, ...JOG_FILES, ...LAST_FILES]) expect(existsSync(join(ROOT, f)), f).toBe(true);
});

test('quiet files first, then jog, then the rest heaviest first (unknown files in the order vitest gave), the upload last', () => {
  const project = (name: string) => ({ name, config: { root: ROOT } });
  const busy = project('conformance');
  const quiet = project('conformance-quiet');
  const jog = project('conformance-jog');
  const spec = (p: ReturnType<typeof project>, f: string) => ({ project: p, moduleId: join(ROOT, f) });
  // vitest's order: projects contiguous, files in any order within them
  const files = [
    spec(busy, 'suites/trajectory/upload.test.ts'),
    spec(busy, 'suites/grant/grant.test.ts'),
    spec(busy, 'suites/events/other.test.ts'),
    spec(busy, 'suites/planner/cancel.test.ts'),
    spec(busy, 'suites/remote/timeouts.test.ts'),
    spec(jog, 'suites/jog/jog.test.ts'),
    spec(quiet, 'suites/telemetry/busy.test.ts'),
    spec(quiet, 'suites/observation/keepalive.test.ts'),
  ];
  const out = longestFirst(files);
  expect(out.map((s) => `${s.project.name}:${s.moduleId.slice(ROOT.length + 1)}`)).toEqual([
    'conformance-quiet:suites/observation/keepalive.test.ts',
    'conformance-quiet:suites/telemetry/busy.test.ts',
    'conformance-jog:suites/jog/jog.test.ts',
    'conformance:suites/remote/timeouts.test.ts',
    'conformance:suites/planner/cancel.test.ts',
    'conformance:suites/grant/grant.test.ts',
    'conformance:suites/events/other.test.ts',
    'conformance:suites/trajectory/upload.test.ts',
  ]);
});
