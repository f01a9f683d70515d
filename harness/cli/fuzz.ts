// `hil fuzz`: the model (harness/model/) against a target for some minutes, or two targets side by side
// (--differential).

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { targetFromEnv } from '../targets/index.ts';
import { parseExact, stringifyExact } from '../oracle/json.ts';
import { ROOT, DEFAULT_REPORTS, UsageError, wantsHelp } from './common.ts';

/** `hil fuzz`: the model (harness/model/) against a target for some minutes; figures printed and kept. */
export async function fuzz(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'fuzz')) return 0;
  const { values } = parseArgs({
    args,
    options: {
      target: { type: 'string', default: 'sim' },
      minutes: { type: 'string', default: '1' },
      seed: { type: 'string' },
      commands: { type: 'string', default: '200' },
      socket: { type: 'string' },
      machine: { type: 'string' },
      bench: { type: 'string' },
      'allow-motion': { type: 'boolean', default: false },
      strict: { type: 'boolean', default: false },
      differential: { type: 'string' },
      attach: { type: 'string' },
    },
  });
  if (values.differential !== undefined) return fuzzDifferential(values);
  if (values.attach !== undefined && !existsSync(resolve(values.attach))) throw new UsageError(`--attach ${values.attach}: no such run record (a run.json written by hil run)`);
  const kind = values.target!;
  const minutes = Number(values.minutes);
  const maxCommands = Number(values.commands);
  if (!['sim', 'ethercat-fake', 'external', 'rig'].includes(kind)) throw new UsageError(`--target ${kind}: expected sim, ethercat-fake, external or rig`);
  if (!(minutes > 0)) throw new UsageError('--minutes must be a positive number');
  if (!Number.isInteger(maxCommands) || maxCommands < 1) throw new UsageError('--commands must be a positive integer');
  if (kind === 'external' && !values.socket) throw new UsageError('--target external needs --socket PATH');
  if (kind === 'rig' && (!values.machine || !values.bench)) throw new UsageError('--target rig needs --machine CONFIG and --bench PORT');
  const { checkModel, failureReport } = await import('../model/commands.ts');
  const { newStats } = await import('../model/run.ts');
  const { KNOWN_DEFECTS, rulesWithKnownDefects } = await import('../model/variants.ts');
  const { REFERENCE_RULES } = await import('../model/model.ts');
  // Known defects of the reference stack (harness/model/variants.ts) are allowed unless --strict.
  const rules = values.strict ? REFERENCE_RULES : rulesWithKnownDefects();
  if (!values.strict) for (const d of KNOWN_DEFECTS) process.stdout.write(`known defect allowed (--strict to refuse it): ${d.name}: ${d.reason}\n`);
  const { prebuildReference, PREBUILT_ENV } = await import('../targets/reference.ts');
  const built = kind === 'sim' || kind === 'ethercat-fake' ? await prebuildReference() : undefined;
  if (built) process.env[PREBUILT_ENV] = built.dir;
  const { target, stepped } = await openFuzzTarget(kind, values);
  const motion = target.abilities.motion && (kind !== 'rig' || values['allow-motion']);
  const stats = newStats();
  const started = performance.now();
  const until = started + minutes * 60_000;
  let failed = false;
  let failure: string | undefined;
  const seeds: number[] = [];
  try {
    process.stdout.write(`hil fuzz: target ${kind} (${stepped ? 'stepped clock' : 'real time'}), ${minutes} min, sequences up to ${maxCommands} commands${motion ? '' : ', motion commands left out'}
`);
    while (performance.now() < until && !failed) {
      const seed = values.seed !== undefined && seeds.length === 0 ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
      seeds.push(seed);
      process.stdout.write(`seed ${seed} (replay: HIL_MODEL_SEED=${seed} HIL_MODEL_COMMANDS=${maxCommands})
`);
      // A few sequences per seed, then the clock is looked at again (a sequence is never cut off midway,
      // so the cell is always left released).
      const r = await checkModel({ target, rules, seed, numRuns: 5, maxCommands, motion, stats });
      if (r.failed) {
        failed = true;
        failure = r.error?.split('\n')[0] ?? 'model run failed';
        process.stdout.write(`${failureReport(r, { maxCommands })}
`);
      }
    }
  } finally {
    await target.close();
    if (built) await built.remove();
  }
  const transitions = Object.entries(stats.hits).filter(([k]) => k.startsWith('transition:')).sort();
  const figures = {
    target: kind,
    clock: stepped ? 'stepped' : 'real time',
    minutes,
    seeds,
    passed: !failed,
    ...(failure !== undefined ? { failure } : {}),
    sequences: stats.sequences,
    commands: stats.commands,
    transitions_reached: transitions.length,
    per_transition: Object.fromEntries(transitions),
    per_rule: Object.fromEntries(Object.entries(stats.hits).sort()),
    wall_ms: Math.round(performance.now() - started),
  };
  process.stdout.write(`sequences ${figures.sequences}, commands ${figures.commands}, transitions reached ${figures.transitions_reached}
`);
  for (const [k, n] of transitions) process.stdout.write(`  ${k}: ${n}
`);
  // The fuzz run's own record: its figures with what ran them. A conformance run's record is changed only
  // when asked (--attach RUN.json): the last reports/run.json may be any earlier, unrelated run.
  const { gitRevisionOf, packageVersion } = await import('../version.ts');
  mkdirSync(DEFAULT_REPORTS, { recursive: true });
  const own = { schema: 'cell-hil.fuzz.v1', command: ['hil', 'fuzz', ...args].join(' '), finished_at: new Date().toISOString(), package_version: packageVersion(ROOT), git_revision: gitRevisionOf(ROOT) ?? 'unknown', ...figures };
  writeFileSync(join(DEFAULT_REPORTS, 'fuzz.json'), `${JSON.stringify(own, null, 2)}\n`);
  process.stdout.write(`hil fuzz: ${join(DEFAULT_REPORTS, 'fuzz.json')}${values.attach ? '' : ' (hil fuzz --attach RUN.json adds the figures to a run\'s report)'}\n`);
  const runJson = values.attach !== undefined ? resolve(values.attach) : undefined;
  if (runJson) {
    try {
      // Exact JSON both ways: run.json holds uint64 values (generations, sequences) a float would round.
      // run.json schema v3 (harness/report/run.schema.json): the figures go under model.fuzz; the record is
      // checked before it is written back, so a record nobody can read back is never left behind.
      const run = parseExact(readFileSync(runJson)) as Record<string, unknown>;
      run.schema = 'cell-hil.run.v3';
      run.model = { ...((run.model as object | undefined) ?? {}), fuzz: figures };
      const { runSchemaProblems } = await import('../report/run-schema.ts');
      const problems = runSchemaProblems(JSON.parse(stringifyExact(run)));
      if (problems.length) throw new Error(`the record would not match run.schema.json: ${problems.join('; ')}`);
      writeFileSync(runJson, stringifyExact(run));
    } catch (e) {
      process.stderr.write(`hil fuzz: run.json not updated: ${(e as Error).message}\n`);
    }
  }
  return failed ? 1 : 0;
}

export type FuzzValues = { socket?: string; machine?: string; bench?: string; 'allow-motion'?: boolean; minutes?: string; seed?: string; commands?: string; differential?: string };

/** A fuzz target: the stepped clock and short Home where the target can give them (never sleeping through real time); otherwise real time. */
export async function openFuzzTarget(kind: string, values: FuzzValues): Promise<{ target: import('../targets/types.ts').Target; stepped: boolean }> {
  // The target's options as `hil run` hands them on (each descriptor reads its own: harness/targets/index.ts).
  const t = targetFromEnv({
    HIL_TARGET: kind === 'ethercat-fake' ? 'sim' : kind,
    ...(values.socket ? { HIL_SOCKET: resolve(values.socket) } : {}),
    ...(values.machine ? { HIL_MACHINE: resolve(values.machine) } : {}),
    ...(values.bench ? { HIL_BENCH: values.bench === 'sim' ? 'sim' : resolve(values.bench) } : {}),
    ...(values['allow-motion'] ? { HIL_ALLOW_MOTION: '1' } : {}),
    ...(kind === 'ethercat-fake' ? { HIL_DRIVER: 'ethercat-fake' } : {}),
    ...(kind === 'rig' && process.env.HIL_RIG_DRIVER ? { HIL_RIG_DRIVER: process.env.HIL_RIG_DRIVER } : {}),
  });
  const { MODEL_VARIANT } = await import('../model/commands.ts');
  const short = t.cannotProvide(MODEL_VARIANT) === undefined;
  const stepped = short || t.cannotProvide({ clock: 'stepped' }) === undefined;
  const target = short ? await t.openVariant(MODEL_VARIANT) : stepped ? await t.openVariant({ clock: 'stepped' }) : await t.open();
  return { target, stepped };
}

/** `hil fuzz --differential A,B`: each generated sequence on two targets; the first reply that differs ends the run. */
export async function fuzzDifferential(values: FuzzValues): Promise<number> {
  const kinds = values.differential!.split(',');
  if (kinds.length === 2 && kinds[0] === 'sim' && kinds[1] === 'replay') return fuzzReplay(values);
  if (kinds.length !== 2 || !kinds.every((k) => ['sim', 'ethercat-fake'].includes(k))) {
    throw new UsageError(`--differential ${values.differential}: expected two of sim, ethercat-fake, or sim,replay`);
  }
  const minutes = Number(values.minutes ?? '1');
  const maxCommands = Number(values.commands ?? '200');
  if (!(minutes > 0)) throw new UsageError('--minutes must be a positive number');
  if (!Number.isInteger(maxCommands) || maxCommands < 1) throw new UsageError('--commands must be a positive integer');
  const { differential, differentialReport, sequenceOf, sharedAbilities } = await import('../model/differential.ts');
  const { prebuildReference, PREBUILT_ENV } = await import('../targets/reference.ts');
  const built = await prebuildReference();
  process.env[PREBUILT_ENV] = built.dir;
  const opened: Array<import('../targets/types.ts').Target> = [];
  let status = 0;
  const seeds: number[] = [];
  let commands = 0;
  try {
    for (const k of kinds) opened.push((await openFuzzTarget(k, values)).target);
    const [a, b] = opened as [import('../targets/types.ts').Target, import('../targets/types.ts').Target];
    const ab = await sharedAbilities(a, b);
    const until = performance.now() + minutes * 60_000;
    process.stdout.write(`hil fuzz --differential ${kinds.join(',')}: ${minutes} min, sequences up to ${maxCommands} commands\n`);
    while (performance.now() < until) {
      const seed = values.seed !== undefined && seeds.length === 0 ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
      seeds.push(seed);
      const sequence = sequenceOf(ab, seed, maxCommands);
      commands += sequence.length;
      const r = await differential(a, b, sequence, { ab });
      if (r.first) {
        process.stdout.write(`${differentialReport(r, { names: [kinds[0]!, kinds[1]!], seed, maxCommands })}\n`);
        status = 1;
        break;
      }
      process.stdout.write(r.timing ? `seed ${seed}: ${differentialReport(r, { names: [kinds[0]!, kinds[1]!] })}\n` : `seed ${seed}: ${sequence.length} commands answered alike\n`);
    }
  } finally {
    for (const t of opened) await t.close();
    await built.remove();
  }
  process.stdout.write(`differential: ${seeds.length} sequences, ${commands} commands, ${status ? 'a difference found' : 'no difference'}\n`);
  return status;
}

/**
 * `hil fuzz --differential sim,replay`: each generated sequence is recorded on a sim stack (stepped clock,
 * `--record`) and sent again to a stack replaying that recording (`--driver replay --replay-paced`, as the
 * replay target starts one: harness/targets/replay.ts). Only the public interface: `hil serve` flags, the
 * recording file and the verdict file the replay stack writes when it stops (docs/recording.md).
 */
export async function fuzzReplay(values: FuzzValues): Promise<number> {
  const minutes = Number(values.minutes ?? '1');
  const maxCommands = Number(values.commands ?? '200');
  if (!(minutes > 0)) throw new UsageError('--minutes must be a positive number');
  if (!Number.isInteger(maxCommands) || maxCommands < 1) throw new UsageError('--commands must be a positive integer');
  const { differentialReplay, differentialReport, sequenceOf } = await import('../model/differential.ts');
  const { describedAbilities } = await import('../model/commands.ts');
  const { replayStacks } = await import('../model/replay-side.ts');
  const { prebuildReference, PREBUILT_ENV } = await import('../targets/reference.ts');
  const built = await prebuildReference();
  process.env[PREBUILT_ENV] = built.dir;
  const names: [string, string] = ['sim', 'replay'];
  let status = 0;
  const seeds: number[] = [];
  let commands = 0;
  try {
    const until = performance.now() + minutes * 60_000;
    process.stdout.write(`hil fuzz --differential sim,replay: ${minutes} min, sequences up to ${maxCommands} commands\n`);
    while (performance.now() < until) {
      const seed = values.seed !== undefined && seeds.length === 0 ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
      seeds.push(seed);
      const stacks = await replayStacks({ ...(values.machine ? { machine: values.machine } : {}), run: `hil fuzz seed ${seed}` });
      try {
        const first = await stacks.record();
        const ab = await describedAbilities(first);
        const sequence = sequenceOf(ab, seed, maxCommands);
        commands += sequence.length;
        const r = await differentialReplay(sequence, { ab, record: async () => first, replay: stacks.replay });
        const verdict = stacks.verdictText(r.verdict);
        if (r.first || stacks.diverged(r.verdict)) {
          process.stdout.write(`${differentialReport(r, { names, seed, maxCommands })}\n${verdict}\n`);
          status = 1;
          break;
        }
        process.stdout.write(r.timing ? `seed ${seed}: ${differentialReport(r, { names })}\n${verdict}\n` : `seed ${seed}: ${sequence.length} commands answered alike; ${verdict}\n`);
      } finally {
        await stacks.remove();
      }
    }
  } finally {
    await built.remove();
  }
  process.stdout.write(`differential: ${seeds.length} sequences, ${commands} commands, ${status ? 'a difference found' : 'no difference'}\n`);
  return status;
}
