// Global setup of the conformance project: bundle the reference stack once for the whole run, so each of
// the run's many stack processes starts from plain JavaScript (harness/targets/reference.ts). A run that
// already names a bundle, or sets HIL_STACK_PREBUILT=off, is left alone. A bundle the `hil` command began
// before starting vitest (reference.ts startEarlyPrebuild) is taken as it is; that command removes it.

import { PREBUILT_ENV, earlyPrebuild, prebuildReference } from './reference.ts';

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env[PREBUILT_ENV]) return undefined;
  const early = earlyPrebuild();
  if (early) {
    process.env[PREBUILT_ENV] = (await early).dir;
    return async () => {
      delete process.env[PREBUILT_ENV];
    };
  }
  const built = await prebuildReference();
  process.env[PREBUILT_ENV] = built.dir;
  return async () => {
    delete process.env[PREBUILT_ENV];
    await built.remove();
  };
}
