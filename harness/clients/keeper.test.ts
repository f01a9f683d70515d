// The grant keeper (harness/clients/keeper.ts): its thread renews a grant against a service that answers
// here, and the judgement of a refused renewal from the figures: the target's doing when the renewal was
// sent and answered within the lease of the previous one, the host's otherwise.

import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { ControlClient } from './control.ts';
import { judgeKept, judgeRenewals, keepGrant, keptLoss, type RenewalRecord } from './keeper.ts';
import { lapses, noteRefusal } from './lapses.ts';

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

test('renewals answered out of order: every accepted one bounds the deadline, whenever it was answered', () => {
  // Sent at 100 and 200 (in flight together with the one sent at 300); the one sent at 300 is refused at
  // 700, before the one sent at 200 is answered (accepted) at 800. That acceptance set a deadline no
  // earlier than 200 + 500 = 700: a refusal answered by 700 is the target's.
  const loss = judgeRenewals(0, 500, [r(100, 50), r(300, 400, 409, 'expired'), r(200, 600)]);
  expect(loss?.target).toBe(true);
  expect(loss?.text).toMatch(/renewal sent 100 ms after the last accepted one \(0 ms after it was due\), answered in 400 ms; lease 500 ms \(500 ms <= lease\)/);
  // Sent before the last accepted one: said so.
  expect(judgeRenewals(0, 500, [r(300, 700, 409, 'expired'), r(400, 650)])?.text).toMatch(/renewal sent 100 ms before the last accepted one \(in flight together\)/);
  // One ms later than that deadline: the host's.
  expect(judgeRenewals(0, 500, [r(100, 50), r(300, 401, 409, 'expired'), r(200, 600)])?.target).toBe(false);
});

test('a request of the test refused as lapsed before the keeper was refused: the host\'s only when no renewal got through for a whole lease', () => {
  const lapse = (answered: number, error = 'control_session_stale: session expired') => ({ answered, error });
  // Renewed at 100 and 200: a lapse answered at 650 is within 200 + 500: the grant should have been alive
  // (a target that expired it early, or a refusal about another grant): nothing said, the failure stands.
  expect(judgeKept(0, 500, [r(100, 5), r(200, 5)], [lapse(650)])).toBeUndefined();
  expect(judgeKept(0, 500, [r(100, 5), r(200, 5)], [lapse(700)])).toBeUndefined();
  // Answered at 701: no renewal sent within the lease before it: the keeper fell behind (the host's).
  const late = judgeKept(0, 500, [r(100, 5), r(200, 5), r(900, 300, 200, '', 300)], [lapse(701)]);
  expect(late?.target).toBe(false);
  expect(late?.text).toMatch(/refused \(control_session_stale: session expired\) 501 ms after the last accepted renewal was sent, against a lease of 500 ms; the keeper's next renewal was sent 700 ms after it \(600 ms after it was due\) and answered in 300 ms/);
  // A renewal answered after the lapse does not count as having moved the deadline before it.
  expect(judgeKept(0, 500, [r(100, 5), r(650, 100)], [lapse(701)])?.target).toBe(false);
  // Lapses before the keeping began, or long after it stopped, are another grant's.
  expect(judgeKept(1_000, 500, [], [lapse(999)])).toBeUndefined();
  expect(judgeKept(0, 500, [], [lapse(5_000)], 1_000)).toBeUndefined();
  expect(judgeKept(0, 500, [], [lapse(1_400)], 1_000)?.target).toBe(false);
  // The core's own refusal (no_grant: lease expired) of a request sent at 250: only the renewals sent before
  // it had reached the core, so the one sent at 400 does not count; answered at 701 it is the host's, at 700
  // (within 200 + 500) it stands; a service refusal with the same figures counts every accepted renewal.
  const native = (answered: number) => ({ answered, error: 'no_grant: lease expired', sent: 250 });
  expect(judgeKept(0, 500, [r(100, 5), r(200, 5), r(400, 5)], [native(701)])?.target).toBe(false);
  expect(judgeKept(0, 500, [r(100, 5), r(200, 5), r(400, 5)], [native(700)])).toBeUndefined();
  expect(judgeKept(0, 500, [r(100, 5), r(200, 5), r(400, 5)], [{ ...native(701), error: 'control_session_stale: session expired' }])).toBeUndefined();
  // The keeper's own refusal decides when there is one (judgeRenewals), a stale one included.
  expect(judgeKept(0, 500, [r(100, 1), r(200, 1, 409, 'control_session_stale')], [lapse(5_000)])).toBeUndefined();
  expect(judgeKept(0, 500, [r(100, 5), r(200, 5, 409, 'expired')], [lapse(900)])?.target).toBe(true);
});

test('only refusals that say the grant ended by its lease are noted as lapses', () => {
  const n = lapses.length;
  noteRefusal(409, 'expired: the lease of this session expired');
  noteRefusal(409, 'control_session_stale: session expired');
  noteRefusal(409, 'control_session_stale: the grant ended while the program was being received');
  noteRefusal(409, 'no_grant: no current grant');
  noteRefusal(409, 'control_session_stale: generation 3 is not current');
  noteRefusal(409, 'handle_superseded: a newer preparation');
  noteRefusal(200, 'expired: x');
  noteRefusal(409, undefined);
  expect(lapses.slice(n).map((l) => l.error.split(':')[0])).toEqual(['expired', 'control_session_stale', 'control_session_stale', 'no_grant']);
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
    const k = keepGrant(client, { session: 'abc', generation: 18446744073709551615n }, 60_000, 20, performance.timeOrigin + performance.now(), { inFlight: 1 });
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

test('renewals are pipelined: one answered later than the period does not hold back the next, so a lease longer than the period survives round trips longer than the lease', async () => {
  // A service that admits each renewal when it arrives (its deadline: arrival + lease, as document 1 part 3
  // renew moves it) and answers it 450 ms later, with a lease of 400 ms renewed every 40 ms. A keeper that
  // sent the next renewal only after the previous answer would send its second one at about 490 ms, after
  // the deadline of 440 the first one set: refused expired.
  const LEASE = 400;
  let deadline = 0;
  let outstanding = 0;
  let overlap = 0;
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const t = performance.timeOrigin + performance.now();
      const ok = t <= deadline;
      if (ok) deadline = t + LEASE;
      outstanding++;
      overlap = Math.max(overlap, outstanding);
      setTimeout(() => {
        outstanding--;
        res.writeHead(ok ? 200 : 409, { 'content-type': 'application/json' }).end(ok ? '{}' : '{"error":"expired: the lease of this session expired"}');
      }, 450);
    });
  });
  const sock = join(dir, 'pipelined.sock');
  await new Promise<void>((ok) => srv.listen(sock, ok));
  const client = new ControlClient(sock);
  try {
    const start = performance.timeOrigin + performance.now();
    deadline = start + LEASE;
    const k = keepGrant(client, { session: 'p', generation: 1n }, LEASE, 40, start);
    for (let i = 0; i < 400 && k.records.length < 2; i++) await new Promise((ok) => setTimeout(ok, 10));
    k.stop();
    await k.settle();
    expect(k.records.length).toBeGreaterThanOrEqual(2);
    expect(k.records.map((x) => [x.status, x.label]).filter(([st]) => st !== 200)).toEqual([]);
    // A second renewal reached the service while the first was unanswered.
    expect(overlap).toBeGreaterThan(1);
    expect(k.loss()).toBeUndefined();
  } finally {
    await client.close();
    srv.close();
  }
});

test('inFlight 1 sends the next renewal only after the previous answer', async () => {
  let outstanding = 0;
  let overlap = 0;
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      outstanding++;
      overlap = Math.max(overlap, outstanding);
      setTimeout(() => {
        outstanding--;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      }, 60);
    });
  });
  const sock = join(dir, 'serial.sock');
  await new Promise<void>((ok) => srv.listen(sock, ok));
  const client = new ControlClient(sock);
  try {
    const k = keepGrant(client, { session: 'q', generation: 1n }, 10_000, 20, performance.timeOrigin + performance.now(), { inFlight: 1 });
    for (let i = 0; i < 400 && k.records.length < 3; i++) await new Promise((ok) => setTimeout(ok, 10));
    k.stop();
    await k.settle();
    expect(overlap).toBe(1);
    // Each left after the previous answer (held back past its due time).
    for (let i = 1; i < k.records.length; i++) expect(k.records[i]!.sent).toBeGreaterThanOrEqual(k.records[i - 1]!.answered);
  } finally {
    await client.close();
    srv.close();
  }
});

/** A service that answers the first renewal at once and the second only after 300 ms, refused expired. */
async function secondRenewalHeld(name: string): Promise<{ srv: ReturnType<typeof createServer>; client: ControlClient; answered: () => number }> {
  let n = 0;
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      n++;
      if (n === 1) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      setTimeout(() => res.writeHead(409, { 'content-type': 'application/json' }).end('{"error":"expired: the lease of this session expired"}'), 300);
    });
  });
  const sock = join(dir, name);
  await new Promise<void>((ok) => srv.listen(sock, ok));
  return { srv, client: new ControlClient(sock), answered: () => n };
}

test('a renewal in flight when the keeper stops is still reported; settle waits for it, and keptLoss judges it', async () => {
  const { srv, client, answered } = await secondRenewalHeld('slow.sock');
  try {
    const from = performance.timeOrigin + performance.now();
    // A lease of 50 ms renewed every 20 ms: the second renewal's answer at 300 ms is past the lease.
    const k = keepGrant(client, { session: 's', generation: 1n }, 50, 20, from, { inFlight: 1 });
    for (let i = 0; i < 200 && answered() < 2; i++) await new Promise((ok) => setTimeout(ok, 10));
    k.stop();
    expect(k.records.length).toBe(1);
    await k.settle();
    expect(k.records.map((x) => [x.status, x.label])).toEqual([[200, ''], [409, 'expired']]);
    const loss = await keptLoss(from);
    expect(loss?.target).toBe(false);
    // A test that begins after this keeper ended (refused, then stopped) is not judged by its loss.
    expect(await keptLoss(performance.timeOrigin + performance.now())).toBeUndefined();
    expect(loss?.text).toMatch(/^the harness's keeper lost the grant to the host's lateness: .*answered in \d+(\.\d)? ms; lease 50 ms/);
  } finally {
    await client.close();
    srv.close();
  }
});

test('a grant whose renewals the test judges itself is left out of keptLoss; its own judgement stays readable', async () => {
  // A renewal held past the lease and refused expired: what a test of the renewal rule judges itself.
  const { srv, client, answered } = await secondRenewalHeld('held.sock');
  try {
    const from = performance.timeOrigin + performance.now();
    const k = keepGrant(client, { session: 't', generation: 1n }, 50, 20, from, { judgedByTest: true, inFlight: 1 });
    for (let i = 0; i < 200 && answered() < 2; i++) await new Promise((ok) => setTimeout(ok, 10));
    k.stop();
    await k.settle();
    expect(k.records.map((x) => [x.status, x.label])).toEqual([[200, ''], [409, 'expired']]);
    expect(k.loss()?.target).toBe(false);
    expect(await keptLoss(from)).toBeUndefined();
  } finally {
    await client.close();
    srv.close();
  }
});

/**
 * The keeper's thread as a conformance worker starts it: from a thread at nice 10 (harness/nice.ts), in a
 * child process so that the test runner's own thread keeps its priority. `drop`: the process gives up root
 * before the keeper starts, so raising a thread's priority is refused.
 */
function keeperFromNiced(drop: boolean) {
  const module = JSON.stringify(fileURLToPath(new URL('./keeper.ts', import.meta.url)));
  const code = [
    `import { getPriority, setPriority } from 'node:os';`,
    `import { keeperPriority } from ${module};`,
    `setPriority(10);`,
    drop ? `process.setgid(65534); process.setuid(65534);` : ``,
    `const p = await keeperPriority();`,
    `console.log(JSON.stringify({ main: getPriority(0), keeper: p.tid === null ? null : getPriority(p.tid), p }));`,
    // A tsx process that gave up root does not end by itself.
    `process.exit(0);`,
  ].join('\n');
  const c = spawnSync(process.execPath, ['--import', import.meta.resolve('tsx'), '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
  expect(c.status, c.stderr).toBe(0);
  return { ...(JSON.parse(c.stdout.trim().split('\n').at(-1)!) as { main: number; keeper: number | null; p: Record<string, unknown> }), stderr: c.stderr };
}

test.skipIf(process.platform !== 'linux')('the keeper thread of a worker at nice 10 runs at nice 0 (the quiet files\' priority), the worker\'s own thread stays at 10; where raising is refused it stays at 10 and says so', () => {
  const root = process.getuid?.() === 0;
  const r = keeperFromNiced(false);
  if (root) {
    // What the kernel has for the keeper's thread, read from outside it: nice 0; the thread that started it keeps 10.
    expect({ main: r.main, keeper: r.keeper, p: r.p }).toEqual({ main: 10, keeper: 0, p: { tid: expect.any(Number), from: 10, nice: 0 } });
    expect(r.stderr).not.toMatch(/grant keeper's thread stays/);
  }
  // Without the privilege to raise a priority (not root, no CAP_SYS_NICE, RLIMIT_NICE 0): the keeper keeps
  // its creator's nice value, reports why, and a warning says so once.
  const refused = root ? keeperFromNiced(true) : r;
  expect({ main: refused.main, keeper: refused.keeper, p: refused.p }).toEqual({ main: 10, keeper: 10, p: { tid: expect.any(Number), from: 10, nice: 10, error: 'EACCES' } });
  expect(refused.stderr).toMatch(/^warning: the grant keeper's thread stays at nice 10 \(raising it to 0 was refused: EACCES\)/m);
}, 120_000);
