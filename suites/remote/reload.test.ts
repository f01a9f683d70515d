// Credential reload (document 1 part 5 item 5): files are reloaded before a full handshake when their
// modification time changes; a failed reload refuses new handshakes and never falls back to the old
// credentials; open connections are kept; TLS session tickets are disabled (every handshake is full).

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { afterAll } from 'vitest';
import { createPair, issueClient, renewCrl, revokeSerial, writeAtomic } from '../../harness/certs.ts';
import type { RemoteStack } from '../../harness/targets/remote.ts';
import { covers, describe, expect, sharedRemote, test } from '../../harness/fixture.ts';
import { caOf, clientOf, expectRefused, logLine, ownStacks, probe, SKIP } from './probe.ts';

let stack: RemoteStack;
let ca: string;
const scratch: string[] = [];

sharedRemote(async (open) => {
  stack = await open();
  ca = caOf(stack);
  await issueClient({ dir: stack.pair.dir, principal: 'operator-1' });
});
afterAll(async () => {
  for (const d of scratch.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('credential reload', () => {
  test('a revocation applies to the next handshake while an open connection keeps working', covers('rule:auth.credential_reload', 'rule:auth.open_connections_kept'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const issued = await issueClient({ dir: stack.pair.dir, principal: 'operator-2' });
    const creds = clientOf(stack, 'operator-2');
    // One keep-alive connection: undici reuses it for every request of this client.
    const kept = await stack.client('operator-2');
    expect((await kept.describe()).status).toBe(200);

    await revokeSerial(stack.pair.dir, issued.serial);
    const from = stack.stderr().length;
    expectRefused(await probe({ port: stack.port, ca, ...creds }));
    await logLine(stack, from, /credentials reloaded/);
    await logLine(stack, from, /refused handshake.*CERT_REVOKED/);

    // The connection opened before the revocation still answers (a new one would be refused).
    const again = await kept.status();
    expect(again.status).toBe(200);
    expect(again.reply.operation).toBe('status');
  });

  test('a corrupt CRL file refuses every new handshake and never falls back to the old CRL', covers('rule:auth.failed_reload_refuses'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const good = clientOf(stack, 'operator-1');
    expect((await probe({ port: stack.port, ca, ...good })).status).toBe(200);
    const saved = await readFile(stack.pair.crl);
    await writeAtomic(stack.pair.crl, '-----BEGIN X509 CRL-----\nnot a crl\n-----END X509 CRL-----\n');
    const from = stack.stderr().length;
    for (let i = 0; i < 2; i++) expectRefused(await probe({ port: stack.port, ca, ...good }));
    await logLine(stack, from, /credentials reload failed/);
    await logLine(stack, from, /refused handshake.*credentials not loaded/);

    // An empty file, a CRL of no PEM block: still refused.
    await writeAtomic(stack.pair.crl, '');
    expectRefused(await probe({ port: stack.port, ca, ...good }));

    // Fixed files load again on the next handshake.
    await writeAtomic(stack.pair.crl, saved);
    expect((await probe({ port: stack.port, ca, ...good })).status).toBe(200);
  });

  test('a server key that does not match the certificate is a failed reload: handshakes refused until fixed', covers('rule:auth.failed_reload_refuses', 'rule:auth.credential_reload'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const good = clientOf(stack, 'operator-1');
    const dir = await mkdtemp(join(tmpdir(), 'hil-pair-'));
    scratch.push(dir);
    const other = await createPair({ dir, pairId: 'cell-remote-01' });
    const saved = await readFile(stack.pair.key);
    await writeAtomic(stack.pair.key, await readFile(other.key), 0o600);
    const from = stack.stderr().length;
    expectRefused(await probe({ port: stack.port, ca, ...good }));
    await logLine(stack, from, /credentials reload failed.*does not match/);
    await writeAtomic(stack.pair.key, saved, 0o600);
    expect((await probe({ port: stack.port, ca, ...good })).status).toBe(200);
  });

  test('a renewed CRL is picked up by modification time', covers('rule:auth.credential_reload'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const from = stack.stderr().length;
    await renewCrl({ dir: stack.pair.dir });
    expect((await probe({ port: stack.port, ca, ...clientOf(stack, 'operator-1') })).status).toBe(200);
    await logLine(stack, from, /credentials reloaded/);
  });

  test('TLS session tickets are not honoured: a second connection offering the session is a full handshake', covers('rule:auth.no_session_tickets'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const creds = clientOf(stack, 'operator-1');
    const session = await new Promise<Buffer | undefined>((resolve, reject) => {
      let got: Buffer | undefined;
      const s = tlsConnect({ host: '127.0.0.1', port: stack.port, ca, ...creds, minVersion: 'TLSv1.3' });
      s.on('session', (b: Buffer) => (got = b));
      s.on('secureConnect', () => s.write('GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'));
      s.on('data', () => undefined);
      s.on('error', reject);
      s.on('close', () => resolve(got));
    });
    // Whether or not a ticket was offered, presenting the last session must not resume it.
    const r = await probe({ port: stack.port, ca, ...creds, session });
    expect(r.status).toBe(200);
    expect(r.reused).toBe(false);
    expect(session, 'TLS 1.3 clients are given a session to present; the point is that it is never resumed').toBeDefined();
  });
});
