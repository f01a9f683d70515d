// Target registry: descriptors are validated loudly when malformed, and chosen by name.

import { externalTarget } from './external.ts';
import { rigTarget } from './rig.ts';
import { simTarget } from './sim.ts';
import { replayTarget } from './replay.ts';
import { HarnessError } from '../errors.ts';
import type { PlannerEndpoint, Target, TargetDescriptor, TargetName, TargetOptions, VariantOptions } from './types.ts';
import { parseVariant } from './variant.ts';
import { tracked } from './live.ts';
import type { OlpSpec, OpenedOlp } from './types.ts';

export const TARGETS: Readonly<Record<TargetName, TargetDescriptor>> = validate({ sim: simTarget, external: externalTarget, replay: replayTarget, rig: rigTarget });

function validate<T extends Record<string, TargetDescriptor>>(all: T): T {
  for (const [key, d] of Object.entries(all)) {
    if (d.name !== key) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} names itself ${d.name}`);
    if (typeof d.open !== 'function' || typeof d.openVariant !== 'function' || typeof d.cannotProvide !== 'function' || !d.summary) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} is malformed`);
    if ((d.startStack === undefined) !== (d.cannotStartStack === undefined)) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} has one of startStack and cannotStartStack without the other`);
  }
  return all;
}

/** Target options from the environment (set by `hil run` or by the user). */
export function targetFromEnv(env: NodeJS.ProcessEnv = process.env): { name: TargetName; options: TargetOptions } {
  const name = (env.HIL_TARGET ?? 'sim') as TargetName;
  if (!(name in TARGETS)) throw new HarnessError('HIL_ERR_TARGET_UNKNOWN', `unknown target ${name}; known: ${Object.keys(TARGETS).join(', ')}`);
  return {
    name,
    options: {
      socket: env.HIL_SOCKET,
      plannerUrl: env.HIL_PLANNER_URL,
      olpUrl: env.HIL_OLP_URL,
      ...(env.HIL_OLP_FACTS ? { olpFacts: env.HIL_OLP_FACTS } : {}),
      machine: env.HIL_MACHINE,
      allowMotion: env.HIL_ALLOW_MOTION === '1',
      bench: env.HIL_BENCH,
      rigDriver: env.HIL_RIG_DRIVER,
      serveArgs: [...(env.HIL_DRIVER ? ['--driver', env.HIL_DRIVER] : []), ...(env.HIL_SERVE_ARGS ? env.HIL_SERVE_ARGS.split(/\s+/).filter(Boolean) : [])],
      ...(env.HIL_RECORD_DIR ? { recordDir: env.HIL_RECORD_DIR } : {}),
      ...(env.HIL_RECORDINGS ? { recordings: env.HIL_RECORDINGS } : {}),
      ...(env.HIL_REPLAY_MODE ? { replayMode: env.HIL_REPLAY_MODE } : {}),
      ...(env.HIL_REPLAY_SPEED ? { replaySpeed: env.HIL_REPLAY_SPEED } : {}),
      ...(env.HIL_MACHINE_SHA256 ? { machineSha256: env.HIL_MACHINE_SHA256 } : {}),
    },
  };
}

export async function openTarget(env: NodeJS.ProcessEnv = process.env, file: Pick<TargetOptions, 'fileClock'> = {}): Promise<Target> {
  const { name, options } = targetFromEnv(env);
  return tracked(await TARGETS[name].open({ ...options, ...file }));
}

/**
 * The variants of the target the environment names, without opening that target: `cannotProvide` gives
 * a skip reason or undefined; `open` validates and starts one (the caller closes it).
 */
export function variantsFromEnv(env: NodeJS.ProcessEnv = process.env): { cannotProvide(o: VariantOptions): string | undefined; open(o: VariantOptions): Promise<Target> } {
  const { name, options } = targetFromEnv(env);
  const d = TARGETS[name];
  return { cannotProvide: (o) => d.cannotProvide(parseVariant(o), options), open: async (o) => tracked(await d.openVariant(parseVariant(o), options)) };
}

/** The weld planner of the target the environment names, without opening its cell (undefined: none). */
export function plannerFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<{ endpoint: PlannerEndpoint; close(): Promise<void> } | undefined> {
  const { name, options } = targetFromEnv(env);
  const d = TARGETS[name];
  return d.openPlanner ? d.openPlanner(options) : Promise.resolve(undefined);
}

/** The OLP server of the target the environment names (undefined: the target has none). */
export function olpFromEnv(spec: OlpSpec, env: NodeJS.ProcessEnv = process.env): Promise<OpenedOlp | undefined> {
  const { name, options } = targetFromEnv(env);
  const d = TARGETS[name];
  return d.openOlp ? d.openOlp(spec, options) : Promise.resolve(undefined);
}

export type { PlannerEndpoint, Target, VariantOptions } from './types.ts';
export type { OlpCellSpec, OlpEndpoint, OlpSpec, OpenedOlp } from './types.ts';
export { describeVariant, parseVariant } from './variant.ts';
