// Harness errors: every code has a verdict, and a client's transport failure is a HIL_ERR_TRANSPORT
// (the target did not answer: a fail) that keeps undici's own code as evidence.

import { expect, test } from 'vitest';
import { ControlClient } from './clients/control.ts';
import { HARNESS_CODES, HarnessError, asTransportError, verdictOfError } from './errors.ts';
import { OracleError } from './oracle/errors.ts';

test('codes are HIL_ERR_ names with a fail or error verdict', () => {
  for (const [code, verdict] of Object.entries(HARNESS_CODES)) {
    expect(code).toMatch(/^HIL_ERR_[A-Z_]+$/);
    expect(['fail', 'error']).toContain(verdict);
  }
  const e = new HarnessError('HIL_ERR_TARGET_START', 'no ready line');
  expect(e).toMatchObject({ code: 'HIL_ERR_TARGET_START', verdict: 'error', name: 'HarnessError' });
  expect(e.message).toBe('HIL_ERR_TARGET_START: no ready line');
  // The oracle's errors are harness errors with their own codes and always the target's fault.
  const o = new OracleError('reply_not_json', 'x');
  expect(o).toBeInstanceOf(HarnessError);
  expect(o).toMatchObject({ code: 'reply_not_json', verdict: 'fail', name: 'OracleError' });
  // Serialized copies (what the reporter sees) keep the verdict.
  expect(verdictOfError(JSON.parse(JSON.stringify(o)))).toBe('fail');
  expect(verdictOfError(JSON.parse(JSON.stringify(e)))).toBe('error');
});

test('a control socket nobody answers on is HIL_ERR_TRANSPORT carrying the socket error code', async () => {
  const c = new ControlClient('/nonexistent/hil/control.sock');
  try {
    const err = await c.describe().then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(err).toBeInstanceOf(HarnessError);
    expect(err).toMatchObject({ code: 'HIL_ERR_TRANSPORT', verdict: 'fail', detail: { cause_code: 'ENOENT' } });
  } finally {
    await c.close();
  }
});

test('asTransportError leaves aborts, harness errors and other errors alone', () => {
  const aborted = Object.assign(new Error('aborted'), { code: 'UND_ERR_ABORTED' });
  expect(asTransportError(aborted, 'x')).toBe(aborted);
  const h = new HarnessError('HIL_ERR_TARGET_MALFORMED', 'x');
  expect(asTransportError(h, 'x')).toBe(h);
  const t = new TypeError('x');
  expect(asTransportError(t, 'x')).toBe(t);
  expect(asTransportError(Object.assign(new Error('reset'), { code: 'UND_ERR_SOCKET' }), 'GET /v1/status')).toMatchObject({ code: 'HIL_ERR_TRANSPORT', detail: { cause_code: 'UND_ERR_SOCKET' } });
});

test('a property failure takes the verdict of the case that failed (its cause)', async () => {
  const fc = (await import('fast-check')).default;
  const { expect: vexpect } = await import('vitest');
  const failing = (run: () => void) => {
    try {
      fc.assert(fc.property(fc.constant(1), run), { numRuns: 1 });
    } catch (e) {
      return e;
    }
    throw new Error('the property did not fail');
  };
  expect(verdictOfError(failing(() => vexpect(1).toBe(2)))).toBe('fail');
  expect(verdictOfError(failing(() => { throw new HarnessError('HIL_ERR_TARGET_START', 'x'); }))).toBe('error');
  expect(verdictOfError(failing(() => { throw new TypeError('suite bug'); }))).toBe('error');
  // A cycle of causes ends.
  const a: { cause?: unknown } = {};
  const b = { cause: a };
  a.cause = b;
  expect(verdictOfError(a)).toBe('error');
});
