// The service's jog ingress in-process: the datagram module loads (or says clearly why not), and frames are
// checked before anything reaches the core (the full paths run in suites/jog against a stack).

import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { compileMachine } from '../config/compile.ts';
import { JOG_FRAME, JogOps, loadUnixDgram } from './jog.ts';
import { JOG_REASON, jogReasonName } from '../core/reasons.ts';

test('unix-dgram loads here; a missing native module gives JOG_SOCKET_MODULE_MISSING with the fix, not a crash', () => {
  expect(loadUnixDgram().mod).toBeDefined();
  const missing = loadUnixDgram('unix-dgram-not-installed');
  expect(missing.mod).toBeUndefined();
  expect(missing.error).toMatch(/^JOG_SOCKET_MODULE_MISSING: unix-dgram-not-installed could not be loaded \(.*\); run `npm ci`/);
});

test('the service names every numeric jog reason the core uses (the registry), and the documented 15', () => {
  for (const [name, n] of Object.entries(JOG_REASON)) expect(jogReasonName(n), name).not.toMatch(/^jog_reason_/);
  expect(jogReasonName(15)).toBe('outside_limits_outward');
  expect(jogReasonName(99)).toBe('jog_reason_99');
  expect(JOG_REASON.outside_limits_outward).toBe(15);
  expect(JOG_FRAME.headerBytes + 8 * 16).toBeLessThanOrEqual(JOG_FRAME.maxBytes);
});

test('two lanes of one jog that close together end it once; a new core incarnation numbers its jogs afresh and is ended again', async () => {
  const commands: string[] = [];
  const core = Object.assign(new EventEmitter(), {
    incarnation: 'a',
    status: { jog: { SessionOpen: 1, JogGeneration: 1n } },
    command: async (op: string) => {
      commands.push(op);
      return { result: { Result: 0 } };
    },
  });
  const authority = { current: { generation: 1n, stopping: false } };
  const machine = { ...compileMachine(readFileSync(new URL('../../fixtures/machines/nine-axis.json', import.meta.url), 'utf8')).machine, dir: '' };
  const ops = new JogOps(core as never, authority as never, machine, '/nonexistent/jog.sock');
  // The core's status still shows the jog open while both lanes go: one end_jog.
  await Promise.all([ops.endFromLane(1n), ops.endFromLane(1n)]);
  expect(commands).toEqual(['end_jog']);
  core.incarnation = 'b';
  await ops.endFromLane(1n);
  expect(commands).toEqual(['end_jog', 'end_jog']);
});
