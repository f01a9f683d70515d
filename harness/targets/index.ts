// The target registry: the descriptors (one module per target: sim.ts with its record mode in record.ts,
// external.ts, replay.ts, rig.ts), validated loudly when malformed and chosen by name. Everything that
// reaches a target goes through the descriptor the environment names (HIL_TARGET, set by `hil run`) and
// the options its own schema reads; nothing here knows what any one target does.

import { externalTarget } from './external.ts';
import { rigTarget } from './rig.ts';
import { simTarget } from './sim.ts';
import { replayTarget } from './replay.ts';
import { HarnessError } from '../errors.ts';
import type { DescriptorAbilities, FileOptions, PerTestFixture, PlannerEndpoint, RemoteListener, StackProcess, Target, TargetDescriptor, TargetName, TestContextLike, TestStack, VariantOptions } from './types.ts';
import { parseVariant } from './variant.ts';
import { isShared as listedShared } from './shared.ts';
import { tracked } from './live.ts';
import type { OlpSpec, OpenedOlp } from './types.ts';

export const TARGETS = validate({ sim: simTarget, external: externalTarget, replay: replayTarget, rig: rigTarget });

/** Refuses a malformed registry loudly (exported for its test). */
export function validate<T extends Record<TargetName, unknown>>(all: T): T {
  for (const [key, d] of Object.entries(all) as Array<[string, TargetDescriptor<object>]>) {
    if (d.name !== key) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} names itself ${d.name}`);
    if (typeof d.open !== 'function' || typeof d.openVariant !== 'function' || typeof d.cannotProvide !== 'function' || typeof d.parse !== 'function' || !d.summary || !d.abilities) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} is malformed`);
    if ((d.startStack === undefined) !== (d.cannotStartStack === undefined)) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} has one of startStack and cannotStartStack without the other`);
    if (d.abilities.testStacks !== (d.startStack !== undefined)) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} says it ${d.abilities.testStacks ? 'starts' : 'starts no'} test stacks and has ${d.startStack ? 'a' : 'no'} startStack`);
    if (d.startStack && d.remoteListener) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} both starts remote listener stacks and reaches someone else's`);
    if (d.abilities.sharedService !== listedShared(key)) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} and SHARED_TARGETS (shared.ts) disagree on whether it is one service for the whole run`);
    const seen = new Set<string>();
    for (const o of d.options) {
      for (const name of [o.key, o.env, ...(o.flag ? [`--${o.flag}`] : [])]) {
        if (seen.has(name)) throw new HarnessError('HIL_ERR_TARGET_DESCRIPTOR', `target descriptor ${key} names option ${name} twice`);
        seen.add(name);
      }
    }
  }
  return all;
}

/** The descriptor of target `name`, or a harness error naming the known ones. */
export function descriptorOf(name: string): TargetDescriptor<object> {
  if (!Object.hasOwn(TARGETS, name)) throw new HarnessError('HIL_ERR_TARGET_UNKNOWN', `unknown target ${name}; known: ${Object.keys(TARGETS).join(', ')}`);
  return TARGETS[name as TargetName] as unknown as TargetDescriptor<object>;
}

/** The target the environment names, bound to the options its schema reads there. */
export interface ChosenTarget {
  name: TargetName;
  /** The target's own options, as its descriptor parsed them (their shape is the target's). */
  options: Readonly<Record<string, unknown>>;
  abilities: DescriptorAbilities;
  open(file?: FileOptions): Promise<Target>;
  cannotProvide(v: VariantOptions): string | undefined;
  openVariant(v: VariantOptions): Promise<Target>;
  openPlanner(): Promise<{ endpoint: PlannerEndpoint; close(): Promise<void> } | undefined>;
  openOlp(spec: OlpSpec): Promise<OpenedOlp | undefined>;
  /** Undefined when the target starts no test stacks (abilities.testStacks). */
  cannotStartStack: ((s: TestStack) => string | undefined) | undefined;
  startStack: ((s: TestStack) => Promise<StackProcess>) | undefined;
  /** Someone else's remote listener the run reaches, or why it has none; undefined when the target has no such thing (TargetDescriptor.remoteListener). */
  remoteListener: (() => RemoteListener | string) | undefined;
  /** The command that starts someone else's service, or why the run has none (TargetDescriptor.serviceCommand). */
  serviceCommand: (() => string | { why: string }) | undefined;
  /** Its recorder's per-test fixture on this run, or undefined (a plain run). */
  perTest: PerTestFixture | undefined;
  /** The target's work while vitest collects a file (TargetDescriptor.warmWorker); nothing for most. */
  warmWorker(): void;
}

function bind<O extends object>(d: TargetDescriptor<O>, env: NodeJS.ProcessEnv): ChosenTarget {
  const o = d.parse(env);
  return {
    name: d.name,
    options: o as Readonly<Record<string, unknown>>,
    abilities: d.abilities,
    open: (file = {}) => d.open({ ...o, ...file }),
    cannotProvide: (v) => d.cannotProvide(v, o),
    openVariant: (v) => d.openVariant(v, o),
    openPlanner: () => (d.openPlanner ? d.openPlanner(o) : Promise.resolve(undefined)),
    openOlp: (spec) => (d.openOlp ? d.openOlp(spec, o) : Promise.resolve(undefined)),
    cannotStartStack: d.cannotStartStack ? (s) => d.cannotStartStack!(s, o) : undefined,
    startStack: d.startStack ? (s) => d.startStack!(s, o) : undefined,
    remoteListener: d.remoteListener ? () => d.remoteListener!(o) : undefined,
    serviceCommand: d.serviceCommand ? () => d.serviceCommand!(o) : undefined,
    perTest: d.perTest?.(o),
    warmWorker: () => d.warmWorker?.(o, env),
  };
}

/** The target the environment names (set by `hil run` or by the user), with its options. */
export function targetFromEnv(env: NodeJS.ProcessEnv = process.env): ChosenTarget {
  return bind(descriptorOf(env.HIL_TARGET ?? 'sim'), env);
}

export async function openTarget(env: NodeJS.ProcessEnv = process.env, file: FileOptions = {}): Promise<Target> {
  return tracked(await targetFromEnv(env).open(file));
}

/**
 * The variants of the target the environment names, without opening that target: `cannotProvide` gives
 * a skip reason or undefined; `open` validates and starts one (the caller closes it).
 */
export function variantsFromEnv(env: NodeJS.ProcessEnv = process.env): { cannotProvide(o: VariantOptions): string | undefined; open(o: VariantOptions): Promise<Target> } {
  const t = targetFromEnv(env);
  return { cannotProvide: (o) => t.cannotProvide(parseVariant(o)), open: async (o) => tracked(await t.openVariant(parseVariant(o))) };
}

/** The weld planner of the target the environment names, without opening its cell (undefined: none). */
export function plannerFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<{ endpoint: PlannerEndpoint; close(): Promise<void> } | undefined> {
  return targetFromEnv(env).openPlanner();
}

/** The OLP server of the target the environment names (undefined: the target has none). */
export function olpFromEnv(spec: OlpSpec, env: NodeJS.ProcessEnv = process.env): Promise<OpenedOlp | undefined> {
  return targetFromEnv(env).openOlp(spec);
}

/** The run gives every test stacks of its own (the target's recorder: a recorded run, the replay target). */
export function perTestStacks(env: NodeJS.ProcessEnv = process.env): boolean {
  return targetFromEnv(env).perTest !== undefined;
}

/** One service for the whole run (its descriptor's abilities.sharedService): settled after every test (harness/targets/shared.ts). */
export function isShared(name: string): boolean {
  return descriptorOf(name).abilities.sharedService;
}

/**
 * The per-test fixture of the suites (harness/fixture.ts, first of all): the chosen target's recorder's, or
 * nothing on a plain run. Vitest reads the names of its first parameter's destructuring: keep it destructured.
 */
export const perTestStacksFixture = async ({ task, skip, onTestFailed }: TestContextLike, use: () => Promise<void>): Promise<void> => {
  const f = targetFromEnv().perTest;
  return f ? f({ task, skip, ...(onTestFailed ? { onTestFailed } : {}) }, use) : use();
};

export type { PlannerEndpoint, RemoteListener, Target, VariantOptions } from './types.ts';
export type { OlpCellSpec, OlpEndpoint, OlpSpec, OpenedOlp } from './types.ts';
export { describeVariant, parseVariant } from './variant.ts';
