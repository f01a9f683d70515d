// The targets as descriptors (harness/targets/index.ts, each target's module): the registry refuses a
// malformed one, each parses its own options from the environment its schema names, and `hil run` builds its
// flags, usage errors and help from the schemas (harness/cli/run-target.ts).

import { resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { applyTargetFlags, targetFlags, targetHelp, targetUsage } from '../cli/run-target.ts';
import { UsageError } from '../cli/common.ts';
import { TARGETS, isShared, perTestStacks, targetFromEnv, validate } from './index.ts';
import type { TargetDescriptor } from './types.ts';

const usage = async (name: string, values: Record<string, string | boolean>): Promise<string> => {
  const e = await applyTargetFlags(name, values, {}).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e, JSON.stringify(values)).toBeInstanceOf(UsageError);
  return (e as Error).message;
};

describe('the registry', () => {
  const all = () => ({ ...TARGETS }) as Record<string, TargetDescriptor<object>>;
  const refused = (change: (all: Record<string, TargetDescriptor<object>>) => void): string => {
    const a = all();
    change(a);
    try {
      validate(a as typeof TARGETS);
    } catch (e) {
      return (e as Error).message;
    }
    return 'accepted';
  };

  test('lists the four targets, each naming itself', () => {
    expect(Object.keys(TARGETS)).toEqual(['sim', 'external', 'replay', 'rig']);
    expect(refused(() => undefined)).toBe('accepted');
    expect(refused((a) => (a.sim = { ...a.sim!, name: 'rig' }))).toBe('HIL_ERR_TARGET_DESCRIPTOR: target descriptor sim names itself rig');
  });

  test('refuses an option named twice, abilities that contradict the entry points, and a shared service the vitest config would not see', () => {
    expect(refused((a) => (a.external = { ...a.external!, options: [...a.external!.options, { key: 'other', flag: 'socket', value: 'PATH', env: 'HIL_OTHER', help: 'x' }] }))).toBe(
      'HIL_ERR_TARGET_DESCRIPTOR: target descriptor external names option --socket twice',
    );
    expect(refused((a) => (a.rig = { ...a.rig!, abilities: { ...a.rig!.abilities, testStacks: true } }))).toMatch(/^HIL_ERR_TARGET_DESCRIPTOR: target descriptor rig says it starts test stacks and has no startStack$/);
    expect(refused((a) => (a.sim = { ...a.sim!, abilities: { ...a.sim!.abilities, sharedService: true } }))).toMatch(/^HIL_ERR_TARGET_DESCRIPTOR: target descriptor sim and SHARED_TARGETS/);
  });

  test('an unknown target is named with the known ones', () => {
    expect(() => targetFromEnv({ HIL_TARGET: 'nowhere' })).toThrow('unknown target nowhere; known: sim, external, replay, rig');
  });
});

describe('each target parses only its own options', () => {
  const env = { HIL_SOCKET: '/s', HIL_MACHINE: '/m.json', HIL_DRIVER: 'ethercat-fake', HIL_SERVE_ARGS: '--x 1', HIL_RECORDINGS: '/r', HIL_BENCH: 'sim', HIL_ALLOW_MOTION: '1', HIL_RIG_DRIVER: 'ethercat-fake', HIL_REPLAY_SPEED: 'max' };
  test('sim: the machine and its hil serve arguments (the driver first); external: its socket and motion; replay: recordings, machine, pace; rig: machine, bench, motion, driver', () => {
    expect(targetFromEnv({ ...env, HIL_TARGET: 'sim' }).options).toEqual({ machine: '/m.json', serveArgs: ['--driver', 'ethercat-fake', '--x', '1'] });
    expect(targetFromEnv({ ...env, HIL_TARGET: 'external' }).options).toEqual({ socket: '/s', allowMotion: true, machine: '/m.json' });
    expect(targetFromEnv({ ...env, HIL_TARGET: 'replay' }).options).toEqual({ recordings: '/r', machine: '/m.json', replaySpeed: 'max' });
    expect(targetFromEnv({ ...env, HIL_TARGET: 'rig' }).options).toEqual({ machine: '/m.json', bench: 'sim', allowMotion: true, rigDriver: 'ethercat-fake' });
  });

  test('abilities come from the descriptor: one service for the run on external and rig; stacks per test with a recorder only', () => {
    expect(['sim', 'external', 'replay', 'rig'].map(isShared)).toEqual([false, true, false, true]);
    expect(perTestStacks({ HIL_TARGET: 'sim' })).toBe(false);
    expect(perTestStacks({ HIL_TARGET: 'sim', HIL_RECORD_DIR: '/d' })).toBe(true);
    expect(perTestStacks({ HIL_TARGET: 'external', HIL_SOCKET: '/s', HIL_RECORD_DIR: '/d' })).toBe(false);
    expect(perTestStacks({ HIL_TARGET: 'replay', HIL_RECORDINGS: '/r' })).toBe(true);
    expect(targetFromEnv({ HIL_TARGET: 'rig' }).startStack).toBeUndefined();
    expect(targetFromEnv({ HIL_TARGET: 'sim' }).startStack).toBeTypeOf('function');
  });
});

describe('hil run takes its target flags from the descriptors', () => {
  test('every flag of every target is accepted by the parser, with its type', () => {
    expect(targetFlags()).toEqual({
      driver: { type: 'string' }, machine: { type: 'string' }, record: { type: 'string' }, socket: { type: 'string' }, 'allow-motion': { type: 'boolean' },
      'planner-url': { type: 'string' }, 'olp-url': { type: 'string' }, 'olp-facts': { type: 'string' }, 'remote-url': { type: 'string' }, 'remote-pair': { type: 'string' },
      'remote-link-profile': { type: 'string' }, 'pair-id': { type: 'string' }, 'pair-revision': { type: 'string' }, 'serve-command': { type: 'string' }, 'remote-resource': { type: 'string' }, 'service-log': { type: 'string' }, 'service-pid': { type: 'string' },
      recordings: { type: 'string' },
      bench: { type: 'string' },
    });
  });

  test("another target's flag is a usage error naming the targets it belongs to and the chosen target's options", async () => {
    expect(await usage('sim', { socket: '/s' })).toBe('--socket applies to target external, not to target sim (its options: --driver NAME, --machine FILE, --record DIR)');
    expect(await usage('sim', { 'allow-motion': true })).toBe('--allow-motion applies to target external and rig, not to target sim (its options: --driver NAME, --machine FILE, --record DIR)');
    expect(await usage('replay', { recordings: '/', record: '/d' })).toBe('--record applies to target sim, not to target replay (its options: --recordings DIR, --machine FILE)');
    expect(await usage('external', { socket: '/s', recordings: '/r' })).toBe('--recordings applies to target replay, not to target external (its options: --socket PATH, --allow-motion, --machine FILE, --planner-url URL, --olp-url URL, --olp-facts FILE, --remote-url URL, --remote-pair DIR, --remote-link-profile lan|internet, --pair-id ID, --pair-revision N, --serve-command CMD, --remote-resource FILE, --service-log FILE, --service-pid PID[,PID...])');
    expect(await usage('external', { socket: '/s', machine: '/nonexistent/m.json' })).toBe('--machine /nonexistent/m.json: no such file');
  });

  test('a required flag missing, and a value the target refuses, are usage errors naming the flag', async () => {
    expect(await usage('external', {})).toBe('--target external needs --socket PATH: the control socket of the service');
    expect(await usage('rig', { bench: 'sim' })).toBe("--target rig needs --machine FILE: the rig's machine configuration");
    expect(await usage('rig', { machine: 'm.json' })).toMatch(/^--target rig needs --bench PORT: /);
    expect(await usage('replay', { recordings: '/nonexistent/recordings' })).toBe('--recordings /nonexistent/recordings: no such directory (HIL_ERR_REPLAY_MISSING; make one with hil run --record DIR)');
    expect(await usage('sim', { driver: 'Bad!' })).toBe('--driver Bad!: not a driver name');
    expect(await usage('nowhere', {})).toBe('unknown target nowhere; known: sim, external, replay, rig');
  });

  test('each option reaches the workers through the variable its schema names, paths made absolute (a simulated bench box stays sim)', async () => {
    const env: NodeJS.ProcessEnv = {};
    await applyTargetFlags('external', { socket: 'rel/control.sock', 'allow-motion': true, 'planner-url': 'http://127.0.0.1:1', 'olp-facts': 'f.json' }, env);
    expect(env).toEqual({ HIL_SOCKET: resolve('rel/control.sock'), HIL_ALLOW_MOTION: '1', HIL_PLANNER_URL: 'http://127.0.0.1:1', HIL_OLP_FACTS: resolve('f.json') });
    const rig: NodeJS.ProcessEnv = {};
    await applyTargetFlags('rig', { machine: 'm.json', bench: 'sim' }, rig);
    expect(rig).toEqual({ HIL_MACHINE: resolve('m.json'), HIL_BENCH: 'sim' });
    const port: NodeJS.ProcessEnv = {};
    await applyTargetFlags('rig', { machine: 'm.json', bench: 'dev/ttyX' }, port);
    expect(port.HIL_BENCH).toBe(resolve('dev/ttyX'));
    const sim: NodeJS.ProcessEnv = {};
    await applyTargetFlags('sim', { driver: 'ethercat-fake' }, sim);
    expect(sim).toEqual({ HIL_DRIVER: 'ethercat-fake' });
  });

  test('the help lists each target with its summary and every option of its schema', () => {
    const help = targetHelp();
    for (const d of Object.values(TARGETS) as TargetDescriptor<object>[]) {
      expect(help).toContain(`  ${d.name}: ${d.summary.split(' ').slice(0, 4).join(' ')}`);
      for (const o of d.options) expect(help, o.env).toContain(o.flag ? `[${o.env}]` : `${o.env}=`);
    }
    expect(targetUsage()).toMatch(/^\[--target sim\|external\|replay\|rig\] \[--driver NAME\] /);
  });
});
