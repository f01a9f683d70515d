// Handshake refusals of the remote listener (document 1 part 5 items 2 to 4 and 8), each its own test
// against a stack started with a freshly made pair. Every refusal is checked against a positive control
// on the same stack (a good client still gets HTTP 200), and the service log says why.

import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { clientFiles, createPair, issueClient, loadIssuer, makeIntermediate, newKey, renewCrl, revokeSerial } from '../../harness/certs.ts';
import type { RemoteStack } from '../../harness/targets/remote.ts';
import { covers, describe, expect, hostBound, sharedRemote, test } from '../../harness/fixture.ts';
import { caOf, clientOf, expectRefused, logLine, ownStacks, plaintext, probe, SKIP } from './probe.ts';

let stack: RemoteStack;
let ca: string;
let good: { cert?: string; key?: string };
const scratch: string[] = [];

// The listener's handshake and credentials play no part in the core's cycles: the stack runs on the stepped
// clock and costs no CPU while the file runs (an idle real-time core wakes 1000 times a second).
sharedRemote(async (open) => {
  stack = await open({ variant: { clock: 'stepped' } });
  ca = caOf(stack);
  await issueClient({ dir: stack.pair.dir, principal: 'operator-1' });
  good = clientOf(stack, 'operator-1');
});
afterAll(async () => {
  for (const d of scratch.splice(0)) await rm(d, { recursive: true, force: true });
});

/** The listener still serves a good client: a refusal is about the credentials probed, not a dead stack. */
async function expectServed(): Promise<void> {
  const r = await probe({ port: stack.port, ca, ...good });
  expect(r.error).toBe('');
  expect(r.status).toBe(200);
}

async function refusedWithLog(o: Parameters<typeof probe>[0], log: RegExp): Promise<string> {
  const from = stack.stderr().length;
  const r = await probe(o);
  expectRefused(r);
  return logLine(stack, from, log);
}

describe('remote listener handshake', () => {
  test('a client certificate of the pair gets HTTP over TLS 1.3 at https://127.0.0.1:<port>', covers('rule:transport.remote_listener', 'rule:auth.tls13_client_cert'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const r = await probe({ port: stack.port, ca, ...good, minVersion: 'TLSv1.3' });
    expect(r.status).toBe(200);
    const body = r.bytes.toString('utf8');
    expect(body).toContain('"operation":"describe"');
    expect(body).toContain('"pair_id":"cell-remote-01"');
  });

  test('a revoked client serial is refused', covers('rule:auth.crl_every_handshake'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const issued = await issueClient({ dir: stack.pair.dir, principal: 'revoked-1' });
    const creds = clientOf(stack, 'revoked-1');
    expect((await probe({ port: stack.port, ca, ...creds })).status).toBe(200);
    await revokeSerial(stack.pair.dir, issued.serial);
    await refusedWithLog({ port: stack.port, ca, ...creds }, /refused handshake.*CERT_REVOKED/);
    await expectServed();
  });

  test('an expired CRL refuses every handshake with "remote CRL not current" in the service log', covers('rule:auth.crl_every_handshake', 'rule:auth.expired_crl'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const day = 86_400_000;
    await renewCrl({ dir: stack.pair.dir, thisUpdate: new Date(Date.now() - 8 * day), nextUpdate: new Date(Date.now() - day) });
    const line = await refusedWithLog({ port: stack.port, ca, ...good }, /remote CRL not current/);
    expect(line).toMatch(/refused handshake/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL that expires while the service runs refuses the next handshake without any file change', covers('rule:auth.crl_every_handshake', 'rule:auth.expired_crl'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const since = performance.now();
    const written = Date.now();
    const nextUpdate = new Date(written + 2_000);
    // The CRL's own nextUpdate (whole seconds in the encoding) is when the service must start refusing.
    const until = Date.parse((await renewCrl({ dir: stack.pair.dir, nextUpdate })).next_update);
    // Loads the short-lived CRL. A handshake that ended only after the CRL's nextUpdate may have been
    // judged after it, when refusing is the rule (document 1 part 5 item 8): the harness took the CRL's
    // whole validity to write it and connect, a slow host, so that refusal says nothing.
    await hostBound(
      {
        rule: 'document 1 part 5 item 8: a CRL inside its validity window lets a good client through',
        marginMs: until - written,
        since,
        measured: () => ({ ms: Date.now() - written, what: 'from writing the CRL to the end of the handshake' }),
      },
      expectServed,
    );
    await new Promise((r) => setTimeout(r, Math.max(0, nextUpdate.getTime() - Date.now()) + 1_100));
    await refusedWithLog({ port: stack.port, ca, ...good }, /remote CRL not current/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL not yet valid is refused', covers('rule:auth.crl_every_handshake'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const day = 86_400_000;
    await renewCrl({ dir: stack.pair.dir, thisUpdate: new Date(Date.now() + day), nextUpdate: new Date(Date.now() + 8 * day) });
    await refusedWithLog({ port: stack.port, ca, ...good }, /remote CRL not current/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL signed by another key is refused', covers('rule:auth.crl_every_handshake'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const other = await newKey();
    await renewCrl({ dir: stack.pair.dir, signingKey: other.privateKey });
    await refusedWithLog({ port: stack.port, ca, ...good }, /refused handshake.*not signed by the --remote-ca/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL with an unsupported critical extension is refused', covers('rule:auth.crl_every_handshake'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    await renewCrl({ dir: stack.pair.dir, unsupportedCritical: true });
    await refusedWithLog({ port: stack.port, ca, ...good }, /refused handshake.*unsupported critical extension/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a client certificate of another CA is refused', covers('rule:auth.tls13_client_cert', 'rule:auth.failed_handshake_no_http'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const dir = await mkdtemp(join(tmpdir(), 'hil-pair-'));
    scratch.push(dir);
    // Same pair id and principal: only the CA differs.
    await createPair({ dir, pairId: stack.pair.pair_id });
    await issueClient({ dir, principal: 'operator-1' });
    const f = clientFiles(dir, 'operator-1');
    await refusedWithLog({ port: stack.port, ca, cert: readFileSync(f.cert, 'utf8'), key: readFileSync(f.key, 'utf8') }, /refused handshake.*not issued directly by the CA/);
    await expectServed();
  });

  test('a client certificate issued by an intermediate CA of the pair is refused', covers('rule:auth.no_intermediate_ca'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const inter = await makeIntermediate(await loadIssuer(stack.pair.dir), 'cell intermediate');
    await issueClient({ dir: stack.pair.dir, principal: 'operator-9', issuer: inter, name: 'via-intermediate' });
    // The client sends its certificate and the intermediate, so the chain to the CA is complete.
    const creds = clientOf(stack, 'via-intermediate');
    expect(creds.cert!.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
    await refusedWithLog({ port: stack.port, ca, ...creds }, /refused handshake.*not issued directly by the CA/);
    await expectServed();
  });

  test('a client without a certificate is refused', covers('rule:auth.tls13_client_cert', 'profile:remote.refusal_log'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    await refusedWithLog({ port: stack.port, ca }, /refused handshake.*no client certificate/);
  });

  test('a TLS 1.2 client is refused with an alert', covers('rule:auth.tls13_client_cert', 'rule:auth.failed_handshake_no_http'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const r = await probe({ port: stack.port, ca, ...good, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' });
    expectRefused(r);
    // The client learns it from a protocol version alert.
    expect(r.error).toMatch(/ALERT_PROTOCOL_VERSION|ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION/);
  });

  test('a client certificate naming another pair is refused', covers('rule:auth.pair_matches', 'rule:auth.certificate_identity'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    await issueClient({ dir: stack.pair.dir, principal: 'operator-2', uris: ['svc-principal:operator-2', 'svc-pair:cell-remote-02'], name: 'wrong-pair' });
    await refusedWithLog({ port: stack.port, ca, ...clientOf(stack, 'wrong-pair') }, /refused handshake.*svc-pair cell-remote-02 differs/);
  });

  test('a client certificate with two principal URIs is refused', covers('rule:auth.certificate_identity'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const pair = `svc-pair:${stack.pair.pair_id}`;
    await issueClient({ dir: stack.pair.dir, principal: 'operator-3', uris: ['svc-principal:operator-3', 'svc-principal:operator-4', pair], name: 'two-principals' });
    await refusedWithLog({ port: stack.port, ca, ...clientOf(stack, 'two-principals') }, /refused handshake.*2 svc-principal URIs/);
    // ... and so are certificates with no principal, two pairs, or a principal outside the token alphabet.
    const cases: Array<[string, string[], RegExp]> = [
      ['no-principal', [pair], /0 svc-principal URIs/],
      ['two-pairs', ['svc-principal:operator-5', pair, 'svc-pair:cell-remote-03'], /2 svc-pair URIs/],
      ['bad-token', ['svc-principal:operator 6', pair], /svc-principal is not a token/],
    ];
    for (const [name, uris, re] of cases) {
      await issueClient({ dir: stack.pair.dir, principal: 'operator-x', uris, name });
      await refusedWithLog({ port: stack.port, ca, ...clientOf(stack, name) }, re);
    }
    await expectServed();
  });

  test('a plaintext HTTP request to the listener gets no HTTP response byte', covers('rule:auth.failed_handshake_no_http'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const bytes = await plaintext(stack.port);
    expect(bytes.toString('latin1')).not.toContain('HTTP/');
    // Whatever came back is at most a TLS alert record (content type 21), never HTTP.
    expect(bytes.length === 0 || bytes[0] === 0x15, `reply bytes ${bytes.subarray(0, 8).toString("hex")}`).toBe(true);
  });
});
