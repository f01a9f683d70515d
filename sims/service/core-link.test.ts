// The service's side of the core channel: a core that cannot start or that dies says why, and the
// reason reaches the caller (and through the service, its log and daemon_incarnation_changed).

import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { compileMachine } from '../config/compile.ts';
import type { CompiledMachine } from '../config/types.ts';
import { CoreLink, CoreUnavailable } from './core-link.ts';

const MACHINE: CompiledMachine = {
  ...compileMachine(readFileSync(new URL('../../fixtures/machines/bench-two-axis.json', import.meta.url), 'utf8')).machine,
  dir: '',
};

test('a core whose driver cannot be had fails to start with the driver\'s own reason, not an exit code', async () => {
  // The replay driver without its recording: its factory refuses with its own reason (REPLAY_BAD_PARAMS).
  const link = new CoreLink(MACHINE, { driver: 'replay', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  const err = await link.start().then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CoreUnavailable);
  expect((err as Error).message).toBe('core failed: RecordingError: the replay driver needs params.file: the recording to play');
  expect(link.running).toBe(false);
});

test('a core that is killed is reported once as an exit with its reason, and a new incarnation can start', async () => {
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  await link.start();
  const first = link.incarnation;
  const exits: string[] = [];
  link.on('exit', (why: string) => {
    exits.push(why);
    void link.start();
  });
  const next = await link.crash();
  expect(exits).toHaveLength(1);
  expect(exits[0]).toMatch(/^core exited with code \d+$/);
  expect(next).not.toBe(first);
  // the stepped core answers a step, and reports its time after it
  const r = await link.step(5);
  expect(r.extra?.cycles).toBe(5n);
  await link.shutdown();
});
