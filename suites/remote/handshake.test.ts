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
import { covers, describe, expect, hostBound, inProfile, sharedRemote, test } from '../../harness/fixture.ts';
import { caOf, clientOf, expectRefused, logLine, plaintext, probe, profileLogLine, type ProbeOptions } from './probe.ts';

let stack: RemoteStack;
let ca: string;
let good: { cert?: string; key?: string };
const scratch: string[] = [];

// The listener's handshake and credentials play no part in the core's cycles: a stack the harness starts
// runs on the stepped clock and costs no CPU while the file runs (an idle real-time core wakes 1000 times a
// second).
sharedRemote(async (open) => {
  stack = await open({ cycleFree: true });
  ca = caOf(stack);
  await issueClient({ dir: stack.pair.dir, principal: 'operator-1' });
  good = clientOf(stack, 'operator-1');
});
afterAll(async () => {
  for (const d of scratch.splice(0)) await rm(d, { recursive: true, force: true });
});

/** Where the listener is, for a probe. */
const at = (): Pick<ProbeOptions, 'host' | 'port'> => ({ host: stack.host, port: stack.port });

/** The listener still serves a good client: a refusal is about the credentials probed, not a dead stack. */
async function expectServed(): Promise<void> {
  const r = await probe({ ...at(), ca, ...good });
  expect(r.error).toBe('');
  expect(r.status).toBe(200);
}

/**
 * A refused handshake, and the line the service logs for it when its log can be read: its wording `log` is
 * docs/profile.md's (informative on someone else's service); `documented` is the error text document 1
 * part 5 item 8 gives, which the log must hold on any service.
 */
async function refusedWithLog(o: Omit<ProbeOptions, 'host' | 'port'>, log: RegExp, documented?: RegExp): Promise<void> {
  const from = stack.stderr().length;
  const r = await probe({ ...at(), ...o });
  expectRefused(r);
  if (!stack.logged) return;
  if (documented) await logLine(stack, from, documented);
  await inProfile('profile:remote.refusal_log', () => profileLogLine(stack, from, log));
}

describe('remote listener handshake', () => {
  test('a client certificate of the pair gets HTTP over TLS 1.3 at https://127.0.0.1:<port>', covers('rule:transport.remote_listener', 'rule:auth.tls13_client_cert', 'profile:describe.fields'), async () => {
    const r = await probe({ ...at(), ca, ...good, minVersion: 'TLSv1.3' });
    expect(r.status).toBe(200);
    const body = r.bytes.toString('utf8');
    expect(body).toContain('"operation":"describe"');
    // That Describe carries the binding, and so the pair id, is docs/profile.md's field list (document 1
    // part 2 "Observation types": the complete field list is not shown).
    await inProfile('profile:describe.fields', () => expect(body).toContain(`"pair_id":"${stack.pair.pair_id}"`));
  });

  test('a revoked client serial is refused', covers('rule:auth.crl_every_handshake'), async () => {
    const issued = await issueClient({ dir: stack.pair.dir, principal: 'revoked-1' });
    const creds = clientOf(stack, 'revoked-1');
    expect((await probe({ ...at(), ca, ...creds })).status).toBe(200);
    await revokeSerial(stack.pair.dir, issued.serial);
    await refusedWithLog({ ca, ...creds }, /refused handshake.*CERT_REVOKED/);
    await expectServed();
  });

  test('an expired CRL refuses every handshake with "remote CRL not current" in the service log', covers('rule:auth.crl_every_handshake', 'rule:auth.expired_crl'), async () => {
    const day = 86_400_000;
    await renewCrl({ dir: stack.pair.dir, thisUpdate: new Date(Date.now() - 8 * day), nextUpdate: new Date(Date.now() - day) });
    await refusedWithLog({ ca, ...good }, /refused handshake.*remote CRL not current/, /remote CRL not current/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL that expires while the service runs refuses the next handshake without any file change', covers('rule:auth.crl_every_handshake', 'rule:auth.expired_crl'), async () => {
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
    await refusedWithLog({ ca, ...good }, /refused handshake.*remote CRL not current/, /remote CRL not current/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL not yet valid is refused', covers('rule:auth.crl_every_handshake'), async () => {
    const day = 86_400_000;
    await renewCrl({ dir: stack.pair.dir, thisUpdate: new Date(Date.now() + day), nextUpdate: new Date(Date.now() + 8 * day) });
    await refusedWithLog({ ca, ...good }, /refused handshake.*remote CRL not current/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL signed by another key is refused', covers('rule:auth.crl_every_handshake'), async () => {
    const other = await newKey();
    await renewCrl({ dir: stack.pair.dir, signingKey: other.privateKey });
    await refusedWithLog({ ca, ...good }, /refused handshake.*not signed by the --remote-ca/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a CRL with an unsupported critical extension is refused', covers('rule:auth.crl_every_handshake'), async () => {
    await renewCrl({ dir: stack.pair.dir, unsupportedCritical: true });
    await refusedWithLog({ ca, ...good }, /refused handshake.*unsupported critical extension/);
    await renewCrl({ dir: stack.pair.dir });
    await expectServed();
  });

  test('a client certificate of another CA is refused', covers('rule:auth.tls13_client_cert', 'rule:auth.failed_handshake_no_http'), async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hil-pair-'));
    scratch.push(dir);
    // Same pair id and principal: only the CA differs.
    await createPair({ dir, pairId: stack.pair.pair_id });
    await issueClient({ dir, principal: 'operator-1' });
    const f = clientFiles(dir, 'operator-1');
    await refusedWithLog({ ca, cert: readFileSync(f.cert, 'utf8'), key: readFileSync(f.key, 'utf8') }, /refused handshake.*not issued directly by the CA/);
    await expectServed();
  });

  test('a client certificate issued by an intermediate CA of the pair is refused', covers('rule:auth.no_intermediate_ca'), async () => {
    const inter = await makeIntermediate(await loadIssuer(stack.pair.dir), 'cell intermediate');
    await issueClient({ dir: stack.pair.dir, principal: 'operator-9', issuer: inter, name: 'via-intermediate' });
    // The client sends its certificate and the intermediate, so the chain to the CA is complete.
    const creds = clientOf(stack, 'via-intermediate');
    expect(creds.cert!.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
    await refusedWithLog({ ca, ...creds }, /refused handshake.*not issued directly by the CA/);
    await expectServed();
  });

  test('a client without a certificate is refused', covers('rule:auth.tls13_client_cert', 'profile:remote.refusal_log'), async () => {
    await refusedWithLog({ ca }, /refused handshake.*no client certificate/);
    await expectServed();
  });

  test('a TLS 1.2 client is refused with an alert', covers('rule:auth.tls13_client_cert', 'rule:auth.failed_handshake_no_http'), async () => {
    const r = await probe({ ...at(), ca, ...good, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' });
    expectRefused(r);
    // The client learns it from a protocol version alert.
    expect(r.error).toMatch(/ALERT_PROTOCOL_VERSION|ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION/);
    await expectServed();
  });

  test('a client certificate naming another pair is refused', covers('rule:auth.pair_matches', 'rule:auth.certificate_identity'), async () => {
    const other = `${stack.pair.pair_id}-other`;
    await issueClient({ dir: stack.pair.dir, principal: 'operator-2', uris: ['svc-principal:operator-2', `svc-pair:${other}`], name: 'wrong-pair' });
    await refusedWithLog({ ca, ...clientOf(stack, 'wrong-pair') }, new RegExp(`refused handshake.*svc-pair ${other.replace(/[.]/g, '\\.')} differs`));
    await expectServed();
  });

  test('a client certificate with two principal URIs is refused', covers('rule:auth.certificate_identity'), async () => {
    const pair = `svc-pair:${stack.pair.pair_id}`;
    await issueClient({ dir: stack.pair.dir, principal: 'operator-3', uris: ['svc-principal:operator-3', 'svc-principal:operator-4', pair], name: 'two-principals' });
    await refusedWithLog({ ca, ...clientOf(stack, 'two-principals') }, /refused handshake.*2 svc-principal URIs/);
    // ... and so are certificates with no principal, two pairs, or a principal outside the token alphabet.
    const cases: Array<[string, string[], RegExp]> = [
      ['no-principal', [pair], /0 svc-principal URIs/],
      ['two-pairs', ['svc-principal:operator-5', pair, 'svc-pair:cell-remote-03'], /2 svc-pair URIs/],
      ['bad-token', ['svc-principal:operator 6', pair], /svc-principal is not a token/],
    ];
    for (const [name, uris, re] of cases) {
      await issueClient({ dir: stack.pair.dir, principal: 'operator-x', uris, name });
      await refusedWithLog({ ca, ...clientOf(stack, name) }, re);
    }
    await expectServed();
  });

  test('a plaintext HTTP request to the listener gets no HTTP response byte', covers('rule:auth.failed_handshake_no_http'), async () => {
    const bytes = await plaintext(stack.host, stack.port);
    expect(bytes.toString('latin1')).not.toContain('HTTP/');
    // Whatever came back is at most a TLS alert record (content type 21), never HTTP.
    expect(bytes.length === 0 || bytes[0] === 0x15, `reply bytes ${bytes.subarray(0, 8).toString("hex")}`).toBe(true);
    await expectServed();
  });
});
