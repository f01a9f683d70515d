// The conformance project's global setup and the bundle the `hil` command begins before vitest starts
// (reference.ts startEarlyPrebuild): the setup takes that bundle instead of building a second one, leaves
// its removal to the command, and stays out of the way of a run that already names a bundle.

import { existsSync } from 'node:fs';
import { afterEach, describe, expect, test } from 'vitest';
import setup from './prebuild-setup.ts';
import { PREBUILT_ENV, earlyPrebuild, startEarlyPrebuild } from './reference.ts';

const saved = process.env[PREBUILT_ENV];
afterEach(() => {
  if (saved === undefined) delete process.env[PREBUILT_ENV];
  else process.env[PREBUILT_ENV] = saved;
});

describe('global setup and the early bundle', () => {
  test('the setup takes the early bundle; its teardown leaves the directory to the command, which removes it', async () => {
    delete process.env[PREBUILT_ENV];
    const drop = startEarlyPrebuild();
    const early = earlyPrebuild();
    expect(early).toBeDefined();
    const { dir } = await early!;
    const teardown = await setup();
    expect(process.env[PREBUILT_ENV]).toBe(dir);
    expect(existsSync(`${dir}/main.js`)).toBe(true);
    await teardown!();
    expect(process.env[PREBUILT_ENV]).toBeUndefined();
    expect(existsSync(`${dir}/main.js`)).toBe(true);
    await drop();
    expect(existsSync(dir)).toBe(false);
    expect(earlyPrebuild()).toBeUndefined();
  }, 60_000);

  test('a run that already names a bundle is left alone (no early bundle is taken, nothing is built)', async () => {
    process.env[PREBUILT_ENV] = '/nonexistent/bundle-named-by-the-caller';
    expect(await setup()).toBeUndefined();
    expect(process.env[PREBUILT_ENV]).toBe('/nonexistent/bundle-named-by-the-caller');
  });
});
