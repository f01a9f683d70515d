// Target registry: descriptors are validated loudly when malformed, and chosen by name.

import { externalTarget } from './external.ts';
import { simTarget } from './sim.ts';
import { TargetError, type Target, type TargetDescriptor, type TargetName, type TargetOptions } from './types.ts';

export const TARGETS: Readonly<Record<TargetName, TargetDescriptor>> = validate({ sim: simTarget, external: externalTarget });

function validate<T extends Record<string, TargetDescriptor>>(all: T): T {
  for (const [key, d] of Object.entries(all)) {
    if (d.name !== key) throw new Error(`target descriptor ${key} names itself ${d.name}`);
    if (typeof d.open !== 'function' || !d.summary) throw new Error(`target descriptor ${key} is malformed`);
  }
  return all;
}

/** Target options from the environment (set by `hil run` or by the user). */
export function targetFromEnv(env: NodeJS.ProcessEnv = process.env): { name: TargetName; options: TargetOptions } {
  const name = (env.HIL_TARGET ?? 'sim') as TargetName;
  if (!(name in TARGETS)) throw new TargetError('target_unknown', `unknown target ${name}; known: ${Object.keys(TARGETS).join(', ')}`);
  return {
    name,
    options: {
      socket: env.HIL_SOCKET,
      machine: env.HIL_MACHINE,
      allowMotion: env.HIL_ALLOW_MOTION === '1',
      serveArgs: env.HIL_SERVE_ARGS ? env.HIL_SERVE_ARGS.split(/\s+/).filter(Boolean) : [],
    },
  };
}

export async function openTarget(env: NodeJS.ProcessEnv = process.env): Promise<Target> {
  const { name, options } = targetFromEnv(env);
  return TARGETS[name].open(options);
}

export type { Target } from './types.ts';
