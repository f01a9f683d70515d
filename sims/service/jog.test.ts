// The service's jog ingress in-process: the datagram module loads (or says clearly why not), and frames are
// checked before anything reaches the core (the full paths run in suites/jog against a stack).

import { expect, test } from 'vitest';
import { JOG_FRAME, JOG_REASON_LABELS, loadUnixDgram } from './jog.ts';
import { JOG_REASON } from '../core/protocol.ts';

test('unix-dgram loads here; a missing native module gives JOG_SOCKET_MODULE_MISSING with the fix, not a crash', () => {
  expect(loadUnixDgram().mod).toBeDefined();
  const missing = loadUnixDgram('unix-dgram-not-installed');
  expect(missing.mod).toBeUndefined();
  expect(missing.error).toMatch(/^JOG_SOCKET_MODULE_MISSING: unix-dgram-not-installed could not be loaded \(.*\); run `npm ci`/);
});

test('the service labels every numeric jog reason the core uses, and the documented 15', () => {
  for (const [name, n] of Object.entries(JOG_REASON)) expect(JOG_REASON_LABELS[n], name).toBeDefined();
  expect(JOG_REASON_LABELS[15]).toBe('outside_limits_outward');
  expect(JOG_REASON.outside_limits_outward).toBe(15);
  expect(JOG_FRAME.headerBytes + 8 * 16).toBeLessThanOrEqual(JOG_FRAME.maxBytes);
});
