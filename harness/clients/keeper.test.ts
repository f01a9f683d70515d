// The grant keeper (harness/clients/keeper.ts): its thread renews a grant against a service that answers
// here, and the judgement of a refused renewal from the figures: the target's doing when the renewal was
// sent and answered within the lease of the previous one, the host's otherwise.

import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { ControlClient } from './control.ts';
import { judgeRenewals, keepGrant, type RenewalRecord } from './keeper.ts';

const r = (sent: number, rtt: number, status = 200, label = '', due = sent): RenewalRecord => ({ due, sent, answered: sent + rtt, status, label, error: label ? `${label}: the lease of this session expired` : '' });

test('a refusal after renewals sent and answered within the lease is the target\'s (FAIL stands)', () => {
  const loss = judgeRenewals(0, 500, [r(100, 5), r(200, 5), r(300, 5, 409, 'expired')]);
  expect(loss?.target).toBe(true);
  expect(loss?.text).toMatch(/^the target expired a grant renewed in time: renewal sent 100 ms after the last accepted one .* answered in 5 ms; lease 500 ms \(105 ms <= lease\)/);
});

test('at the edge: gap plus round trip equal to the lease is still provably in time; one ms more is the host\'s', () => {
  expect(judgeRenewals(0, 500, [r(100, 5), r(590, 10, 409, 'expired')])?.target).toBe(true);
  const late = judgeRenewals(0, 500, [r(100, 5), r(591, 10, 409, 'expired', 200)]);
  expect(late?.target).toBe(false);
  expect(late?.text).toMatch(/renewal sent 491 ms after the last accepted one \(391 ms after it was due\), answered in 10 ms; lease 500 ms; 501 ms > lease/);
});

test('the first renewal is measured from the acquire; a stale refusal (the test ended the grant) is nobody\'s loss', () => {
  expect(judgeRenewals(0, 500, [r(700, 1, 409, 'expired')])?.target).toBe(false);
  expect(judgeRenewals(0, 500, [r(100, 1), r(200, 1, 409, 'control_session_stale')])).toBeUndefined();
  expect(judgeRenewals(0, 500, [r(100, 1), r(200, 1)])).toBeUndefined();
});

const dir = mkdtempSync(join(tmpdir(), 'hil-keeper-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the keeper thread renews with the session and generation until a renewal is refused, and reports each', async () => {
  const sock = join(dir, 'control.sock');
  const bodies: string[] = [];
  const srv = createServer((req, res) => {
    let b = '';
    req.on('data', (c: Buffer) => (b += c.toString()));
    req.on('end', () => {
      bodies.push(b);
      const refuse = bodies.length >= 3;
      res.writeHead(refuse ? 409 : 200, { 'content-type': 'application/json' });
      res.end(refuse ? '{"error":"expired: the lease of this session expired"}' : '{}');
    });
  });
  await new Promise<void>((ok) => srv.listen(sock, ok));
  const client = new ControlClient(sock);
  try {
    const k = keepGrant(client, { session: 'abc', generation: 18446744073709551615n }, 60_000, 20, performance.timeOrigin + performance.now());
    for (let i = 0; i < 200 && k.records.length < 3; i++) await new Promise((ok) => setTimeout(ok, 25));
    k.stop();
    expect(k.records.map((x) => [x.status, x.label])).toEqual([[200, ''], [200, ''], [409, 'expired']]);
    expect(JSON.parse(bodies[0]!.replace('18446744073709551615', '"max"'))).toEqual({ schema: 'svc.rt-control.request.v1', operation: 'renew', session: 'abc', generation: 'max' });
    for (const x of k.records) expect(x.answered).toBeGreaterThanOrEqual(x.sent);
    // Renewed well within a minute's lease: the refusal is the target's.
    expect(k.loss()?.target).toBe(true);
  } finally {
    await client.close();
    srv.close();
  }
});
