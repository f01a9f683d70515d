// The reference programs the harness starts (reference.ts referenceEnv) start without NODE_EXTRA_CA_CERTS:
// Node would read the named bundle and build its root store in each of a run's few hundred processes, and
// none of them trusts a public CA. Checked on what the started process itself has: its environment in
// /proc, or, for the compiler that is gone before it could be read, Node's warning about an unreadable
// bundle on its stderr (printed at start by any process that was handed the variable).

import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { hilConfig } from '../clients/config.ts';
import { startStack } from './sim.ts';
import { openStubPlanner } from './spawn.ts';

const MISSING = '/nonexistent/hil-extra-ca.pem';
let saved: string | undefined;
beforeEach(() => {
  saved = process.env.NODE_EXTRA_CA_CERTS;
  process.env.NODE_EXTRA_CA_CERTS = MISSING;
});
afterEach(() => {
  if (saved === undefined) delete process.env.NODE_EXTRA_CA_CERTS;
  else process.env.NODE_EXTRA_CA_CERTS = saved;
});

/** The environment a running process was started with. */
function environOf(pid: number): string[] {
  return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
}

test('the configuration compiler is started without NODE_EXTRA_CA_CERTS (no warning about the unreadable bundle)', async () => {
  const r = await hilConfig(['--help']);
  expect(r.code).toBe(0);
  expect(r.stderr).toBe('');
});

test('the planner, a stack process and a stack host are started without NODE_EXTRA_CA_CERTS, with the rest of the environment', async () => {
  process.env.HIL_REFERENCE_ENV_PROBE = 'kept';
  const planner = await openStubPlanner();
  const own = await startStack({ args: [], hosted: false });
  const hosted = await startStack({ args: [], hosted: true });
  try {
    for (const pid of [planner.endpoint.pid!, own.ready.pid, hosted.ready.pid]) {
      const env = environOf(pid);
      expect(env.filter((e) => e.startsWith('NODE_EXTRA_CA_CERTS='))).toEqual([]);
      expect(env).toContain('HIL_REFERENCE_ENV_PROBE=kept');
    }
    expect(own.stderr()).not.toContain('extra certs');
  } finally {
    delete process.env.HIL_REFERENCE_ENV_PROBE;
    await Promise.all([planner.close(), own.stop(), hosted.stop()]);
  }
});

test("a simulated run's stacks start with the larger tier-up budget; hil serve's and a rig's with V8's default", async () => {
  const { referenceCommand, TIER_UP_ARGS } = await import('./reference.ts');
  const has = (env: NodeJS.ProcessEnv) => TIER_UP_ARGS.every((a) => referenceCommand('stack', { HIL_STACK_PREBUILT: '/b', ...env }).includes(a));
  expect(TIER_UP_ARGS).toEqual(['--interrupt-budget=1081344']);
  expect([has({ HIL_TARGET: 'sim' }), has({ HIL_TARGET: 'replay' })]).toEqual([true, true]);
  expect([has({}), has({ HIL_TARGET: 'rig' }), has({ HIL_TARGET: 'external' })]).toEqual([false, false, false]);
  // Only the stack: the other reference programs start short-lived or are servers where it gained nothing.
  expect(referenceCommand('planner', { HIL_STACK_PREBUILT: '/b', HIL_TARGET: 'sim' })).toEqual(['/b/planner.js']);
});
