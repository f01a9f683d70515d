// `hil run`'s target options, from the descriptors (harness/targets/index.ts): the flags parseArgs accepts,
// the usage errors of a flag the chosen target does not take or of one it needs and was not given, the
// environment each option reaches the workers through, and the help's section on targets. A target's
// options are spelled once, in its own module.

import { resolve } from 'node:path';
import { TARGETS, descriptorOf } from '../targets/index.ts';
import { spelled } from '../targets/options.ts';
import type { TargetDescriptor, TargetOption } from '../targets/types.ts';
import { UsageError } from './common.ts';

const ALL = Object.values(TARGETS) as unknown as TargetDescriptor<object>[];

/** Every target's flags, as parseArgs takes them (a flag two targets share has one meaning). */
export function targetFlags(): Record<string, { type: 'string' | 'boolean' }> {
  const out: Record<string, { type: 'string' | 'boolean' }> = {};
  for (const d of ALL) for (const o of d.options) if (o.flag) out[o.flag] = { type: o.value === undefined ? 'boolean' : 'string' };
  return out;
}

type Values = Record<string, string | boolean | string[] | undefined>;

const given = (v: Values[string]): boolean => v !== undefined && v !== false;

/** A target chosen on the command line, with its options as its descriptor parsed them. */
export interface CheckedTarget {
  descriptor: TargetDescriptor<object>;
  options: object;
}

/**
 * The chosen target's options from the command line, checked against its schema: a flag of another target,
 * a required one missing, or a value its descriptor refuses is a usage error naming the flag. Writes each
 * option into its environment variable. Nothing is computed or started yet (prepareTarget).
 */
export function checkTargetFlags(name: string, values: Values, env: NodeJS.ProcessEnv = process.env): CheckedTarget {
  let d: TargetDescriptor<object>;
  try {
    d = descriptorOf(name);
  } catch {
    throw new UsageError(`unknown target ${name}; known: ${Object.keys(TARGETS).join(', ')}`);
  }
  const own = new Map(d.options.filter((o) => o.flag).map((o) => [o.flag!, o]));
  for (const flag of Object.keys(targetFlags())) {
    if (!given(values[flag]) || own.has(flag)) continue;
    const owners = ALL.filter((x) => x.options.some((o) => o.flag === flag)).map((x) => x.name);
    throw new UsageError(`--${flag} applies to target ${owners.join(' and ')}, not to target ${name} (${optionsOf(d)})`);
  }
  for (const o of own.values()) if (o.required && !given(values[o.flag!])) throw new UsageError(`--target ${name} needs ${spelled(o)}: ${o.help}`);
  for (const o of own.values()) {
    const v = values[o.flag!];
    if (!given(v)) continue;
    env[o.env] = handedOn(o, v as string | boolean);
  }
  const parsed = d.parse(env);
  const why = d.check?.(parsed);
  if (why !== undefined) throw new UsageError(why);
  return { descriptor: d, options: parsed };
}

/** What the target computes once for the run (a recorded or replayed run's machine digest), into the environment. */
export async function prepareTarget(t: CheckedTarget, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  Object.assign(env, await t.descriptor.prepare?.(t.options));
}

/** checkTargetFlags, then prepareTarget. */
export async function applyTargetFlags(name: string, values: Values, env: NodeJS.ProcessEnv = process.env): Promise<CheckedTarget> {
  const t = checkTargetFlags(name, values, env);
  await prepareTarget(t, env);
  return t;
}

function handedOn(o: TargetOption, v: string | boolean): string {
  if (typeof v === 'boolean') return v ? '1' : '';
  return o.resolve ? o.resolve(v) : o.path ? resolve(v) : v;
}

function optionsOf(d: TargetDescriptor<object>): string {
  const flags = d.options.filter((o) => o.flag).map(spelled);
  return flags.length ? `its options: ${flags.join(', ')}` : 'it takes no options';
}

/** `text` in lines of at most `width` characters, every line after the first indented by `indent` spaces. */
function wrap(text: string, first: string, indent: number, width = 112): string[] {
  const lines: string[] = [];
  let line = first;
  for (const word of text.split(' ')) {
    if (line.length + 1 + word.length > width && line.trim().length > 0 && line.length > indent) {
      lines.push(line);
      line = ' '.repeat(indent) + word;
    } else line = line.length === 0 || line.endsWith(' ') ? line + word : `${line} ${word}`;
  }
  lines.push(line);
  return lines;
}

/** The help's section on targets: each descriptor's summary and options (flags, then variables it reads). */
export function targetHelp(): string {
  const lines = [`  --target NAME     ${ALL.map((d) => d.name).join(', ')} (default sim); the options each takes are listed under it`];
  for (const d of ALL) {
    lines.push(...wrap(d.summary, `  ${d.name}: `, 6));
    for (const o of d.options) {
      const head = o.flag ? spelled(o) : `${o.env}=${o.value ?? '1'}`;
      const text = `${o.required ? '(required) ' : ''}${o.help}${o.flag ? ` [${o.env}]` : ''}`;
      lines.push(...wrap(text, head.length < 18 ? `    ${head.padEnd(18)}` : `    ${head} `, 22));
    }
  }
  return lines.join('\n');
}

/** The usage line's target flags: [--target sim|external|...] then each flag once. */
export function targetUsage(): string {
  const seen = new Map<string, TargetOption>();
  for (const d of ALL) for (const o of d.options) if (o.flag && !seen.has(o.flag)) seen.set(o.flag, o);
  const words = [`[--target ${ALL.map((d) => d.name).join('|')}]`, ...[...seen.values()].map((o) => `[${spelled(o)}]`)];
  // Kept as words: a flag's value stays beside it.
  const lines: string[] = [];
  let line = '';
  for (const w of words) {
    if (line && line.length + 1 + w.length > 96) {
      lines.push(line);
      line = w;
    } else line = line ? `${line} ${w}` : w;
  }
  lines.push(line);
  return lines.join('\n               ');
}
