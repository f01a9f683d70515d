// inProfile (harness/trace.ts) against someone else's service: only the check's own assertions become
// informative differences. A target that drops the connection in the middle of the check makes the test
// ERROR (HIL_ERR_PROFILE_CHECK), or FAIL where the documents owe the answer; a harness error stays itself.

import { createServer, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { ControlClient } from './clients/control.ts';
import { HarnessError, verdictOfError } from './errors.ts';
import { testStateOf } from './report/verdict.ts';
import { inProfile, takeProfileDifferences } from './trace.ts';

const saved = process.env.HIL_TARGET;
const dir = mkdtempSync(join(tmpdir(), 'hil-profile-check-'));
const sock = join(dir, 'control.sock');
// A service that answers Describe and drops the connection on anything else, after reading the request.
const server = createServer((c: Socket) => {
  c.once('data', (b: Buffer) => {
    if (b.toString().startsWith('GET /v1/describe')) c.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}');
    else c.destroy(); // dropped mid-exchange: the request was read, no answer comes
  });
});
let client: ControlClient;

beforeAll(async () => {
  await new Promise<void>((ok) => server.listen(sock, ok));
  client = new ControlClient(sock);
});
afterAll(async () => {
  await client.close();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  if (saved === undefined) delete process.env.HIL_TARGET;
  else process.env.HIL_TARGET = saved;
  takeProfileDifferences();
});

test('on an external target, a connection reset in the middle of the check is ERROR, not an informative difference', async () => {
  process.env.HIL_TARGET = 'external';
  const e = await inProfile('profile:envelope.refusal_operation', async () => {
    expect((await client.raw('GET', '/v1/describe')).status).toBe(200); // the check's first exchange is answered
    await client.raw('POST', '/v1/control', '{"operation":"frobnicate"}'); // the target drops this one
  }).catch((x: unknown) => x);
  expect(e).toBeInstanceOf(HarnessError);
  expect((e as HarnessError).code).toBe('HIL_ERR_PROFILE_CHECK');
  expect(((e as HarnessError).cause as HarnessError).code).toBe('HIL_ERR_TRANSPORT');
  expect((e as HarnessError).detail.cause_code).toMatch(/^(ECONNRESET|UND_ERR_SOCKET|EPIPE)$/);
  expect(takeProfileDifferences()).toEqual([]);
  // The test ends in ERROR (the reporter's state of a test with this error).
  expect(verdictOfError(e)).toBe('error');
  expect(testStateOf('failed', [e])).toBe('errored');
});

test('where the documents owe the answer the check asked for, the reset is the target\'s FAIL', async () => {
  process.env.HIL_TARGET = 'external';
  const e = await inProfile('profile:envelope.refusal_operation', () => client.raw('POST', '/v1/control', '{}'), { owed: true }).catch((x: unknown) => x);
  expect((e as HarnessError).code).toBe('HIL_ERR_TRANSPORT');
  expect(testStateOf('failed', [e])).toBe('failed');
  expect(takeProfileDifferences()).toEqual([]);
});

test('a harness error and a bug of the suite inside the check stay what they are; an assertion is a difference', async () => {
  process.env.HIL_TARGET = 'external';
  const harness = await inProfile('profile:x', () => {
    throw new HarnessError('HIL_ERR_TEST_CHANNEL', 'the test channel refused');
  }).catch((x: unknown) => x);
  expect((harness as HarnessError).code).toBe('HIL_ERR_TEST_CHANNEL');
  const bug = await inProfile('profile:x', () => (undefined as unknown as { a: number }).a).catch((x: unknown) => x);
  expect(bug).toBeInstanceOf(TypeError);
  expect(takeProfileDifferences()).toEqual([]);
  await inProfile('profile:x', () => expect(1, 'the detail').toBe(2));
  expect(takeProfileDifferences()).toEqual([{ profile: 'profile:x', message: 'the detail: expected 1 to be 2 // Object.is equality' }]);
});
