// Reading a target's options through its schema (TargetDescriptor.options): `hil run` writes each option
// the run was given into the environment variable the schema names, and each worker reads them back here,
// so a target's options are spelled once, in its own module.

import { resolve } from 'node:path';
import type { TargetOption } from './types.ts';

/** The machine digest of the configuration under test, computed once by `hil run` (the sim target's record mode, the replay target). */
export const MACHINE_SHA256_OPTION: TargetOption = { key: 'machineSha256', env: 'HIL_MACHINE_SHA256', value: 'SHA256', help: 'the machine digest recordings are filed under (hil run computes it)' };

/** Each option of the schema as the environment holds it: a string, true for a boolean flag set to 1, or undefined. */
export function envValues(schema: readonly TargetOption[], env: NodeJS.ProcessEnv): Record<string, string | boolean | undefined> {
  const out: Record<string, string | boolean | undefined> = {};
  for (const o of schema) {
    const v = env[o.env];
    out[o.key] = o.value === undefined ? v === '1' : v === '' ? undefined : v;
  }
  return out;
}

/** The string options among envValues' (undefined when absent). */
export const str = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

/** The schema's own spelling of an option for a message: its flag, else its variable. */
export const spelled = (o: TargetOption): string => (o.flag ? `--${o.flag}${o.value ? ` ${o.value}` : ''}` : o.env);

/** A path option as `hil run` hands it on: absolute, from where hil was started. */
export const absolute = (v: string): string => resolve(v);
