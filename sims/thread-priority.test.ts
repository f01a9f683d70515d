// The bulk decoders' own priority (sims/thread-priority.ts), checked in a child process so that the test
// runner's thread keeps its own: the calling thread ends at nice 10, HIL_BULK_NICE moves it or (0) leaves it.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const MODULE = fileURLToPath(new URL('./thread-priority.ts', import.meta.url));
const niceAfter = (env: Record<string, string>) => {
  const code = `import { lowerThreadPriority } from ${JSON.stringify(MODULE)}; import { getPriority } from 'node:os'; const r = lowerThreadPriority(); console.log(JSON.stringify({ r: r ?? null, nice: getPriority(0) }));`;
  const p = spawnSync(process.execPath, ['--import', import.meta.resolve('tsx'), '--input-type=module', '-e', code], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
  expect(p.status, p.stderr).toBe(0);
  return JSON.parse(p.stdout.trim().split('\n').at(-1)!) as { r: number | null; nice: number };
};

test.skipIf(process.platform !== 'linux')('a bulk decoder thread runs at nice 10 by default, at HIL_BULK_NICE when set, untouched with 0', () => {
  const base = niceAfter({ HIL_BULK_NICE: '0' });
  expect(base.r).toBeNull();
  // Lowering is always permitted; a runner already niced past the value could only raise it (refused
  // without privilege), which this test does not ask for.
  if (base.nice <= 10) expect(niceAfter({})).toEqual({ r: 10, nice: 10 });
  if (base.nice <= 15) expect(niceAfter({ HIL_BULK_NICE: '15' })).toEqual({ r: 15, nice: 15 });
}, 90_000);
