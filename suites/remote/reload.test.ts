// Credential reload (document 1 part 5 item 5): files are reloaded before a full handshake when their
// modification time changes; a failed reload refuses new handshakes and never falls back to the old
// credentials; open connections are kept; TLS session tickets are disabled (every handshake is full).

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { connect as tlsConnect } from 'node:tls';
import { afterAll } from 'vitest';
import { clientFiles, createPair, issueClient, renewCrl, revokeSerial, writeAtomic } from '../../harness/certs.ts';
import type { RemoteStack } from '../../harness/targets/remote.ts';
import { covers, describe, expect, inProfile, sharedRemote, test } from '../../harness/fixture.ts';
import { caOf, clientOf, expectRefused, probe, profileLogLine, type ProbeOptions } from './probe.ts';

let stack: RemoteStack;
let ca: string;
const scratch: string[] = [];

// The listener's handshake and credentials play no part in the core's cycles: a stack the harness starts
// runs on the stepped clock and costs no CPU while the file runs (an idle real-time core wakes 1000 times a
// second).
sharedRemote(async (open) => {
  stack = await open({ cycleFree: true });
  ca = caOf(stack);
  await issueClient({ dir: stack.pair.dir, principal: 'operator-1' });
});
afterAll(async () => {
  for (const d of scratch.splice(0)) await rm(d, { recursive: true, force: true });
});

/** Where the listener is, for a probe. */
const at = (): Pick<ProbeOptions, 'host' | 'port'> => ({ host: stack.host, port: stack.port });

/** The lines the service logs (docs/profile.md wording: informative on someone else's service), when its log can be read. */
async function logged(from: number, ...lines: RegExp[]): Promise<void> {
  if (!stack.logged) return;
  await inProfile('profile:remote.refusal_log', async () => {
    for (const re of lines) await profileLogLine(stack, from, re);
  });
}

describe('credential reload', () => {
  test('a revocation applies to the next handshake while an open connection keeps working', covers('rule:auth.credential_reload', 'rule:auth.open_connections_kept'), async () => {
    const issued = await issueClient({ dir: stack.pair.dir, principal: 'operator-2' });
    const creds = clientOf(stack, 'operator-2');
    // One keep-alive connection: undici reuses it for every request of this client.
    const kept = await stack.client('operator-2');
    expect((await kept.describe()).status).toBe(200);

    await revokeSerial(stack.pair.dir, issued.serial);
    const from = stack.stderr().length;
    expectRefused(await probe({ ...at(), ca, ...creds }));
    await logged(from, /credentials reloaded/, /refused handshake.*CERT_REVOKED/);

    // The connection opened before the revocation still answers (a new one would be refused).
    const again = await kept.status();
    expect(again.status).toBe(200);
    expect(again.reply.operation).toBe('status');
  });

  test('a corrupt CRL file refuses every new handshake and never falls back to the old CRL', covers('rule:auth.failed_reload_refuses'), async () => {
    const good = clientOf(stack, 'operator-1');
    expect((await probe({ ...at(), ca, ...good })).status).toBe(200);
    const saved = await readFile(stack.pair.crl);
    await writeAtomic(stack.pair.crl, '-----BEGIN X509 CRL-----\nnot a crl\n-----END X509 CRL-----\n');
    const from = stack.stderr().length;
    for (let i = 0; i < 2; i++) expectRefused(await probe({ ...at(), ca, ...good }));
    await logged(from, /credentials reload failed/, /refused handshake.*credentials not loaded/);

    // An empty file, a CRL of no PEM block: still refused.
    await writeAtomic(stack.pair.crl, '');
    expectRefused(await probe({ ...at(), ca, ...good }));

    // Fixed files load again on the next handshake.
    await writeAtomic(stack.pair.crl, saved);
    expect((await probe({ ...at(), ca, ...good })).status).toBe(200);
  });

  test('a server key that does not match the certificate is a failed reload: handshakes refused until fixed', covers('rule:auth.failed_reload_refuses', 'rule:auth.credential_reload'), async () => {
    const good = clientOf(stack, 'operator-1');
    const dir = await mkdtemp(join(tmpdir(), 'hil-pair-'));
    scratch.push(dir);
    const other = await createPair({ dir, pairId: 'cell-remote-01' });
    const saved = await readFile(stack.pair.key);
    await writeAtomic(stack.pair.key, await readFile(other.key), 0o600);
    const from = stack.stderr().length;
    expectRefused(await probe({ ...at(), ca, ...good }));
    await logged(from, /credentials reload failed.*does not match/);
    await writeAtomic(stack.pair.key, saved, 0o600);
    expect((await probe({ ...at(), ca, ...good })).status).toBe(200);
  });

  test('a renewed CRL is picked up by modification time', covers('rule:auth.credential_reload'), async () => {
    const from = stack.stderr().length;
    await renewCrl({ dir: stack.pair.dir });
    expect((await probe({ ...at(), ca, ...clientOf(stack, 'operator-1') })).status).toBe(200);
    await logged(from, /credentials reloaded/);
  });

  test('TLS session tickets are not honoured: a second connection offering the session is a full handshake', covers('rule:auth.no_session_tickets'), async () => {
    const creds = clientOf(stack, 'operator-1');
    const session = await new Promise<Buffer | undefined>((resolve, reject) => {
      let got: Buffer | undefined;
      const s = tlsConnect({ host: stack.host, port: stack.port, ca, ...creds, minVersion: 'TLSv1.3' });
      s.on('session', (b: Buffer) => (got = b));
      s.on('secureConnect', () => s.write(`GET /v1/status HTTP/1.1\r\nHost: ${stack.host}:${stack.port}\r\nConnection: close\r\n\r\n`));
      s.on('data', () => undefined);
      s.on('error', reject);
      s.on('close', () => resolve(got));
    });
    // Tickets are disabled (document 1 part 5): a TLS 1.3 client is given no session to present (Node's
    // 'session' event comes with a NewSessionTicket). Presenting none, or a made-up one, never resumes.
    expect(session, 'a TLS 1.3 session (NewSessionTicket) was sent').toBeUndefined();
    const r = await probe({ ...at(), ca, ...creds, session });
    expect(r.status).toBe(200);
    expect(r.reused).toBe(false);
  });

  test('no NewSessionTicket is sent (openssl s_client -msg counts the handshake messages)', covers('rule:auth.no_session_tickets'), async ({ skip }) => {
    const creds = clientFiles(stack.pair.dir, 'operator-1');
    const out = await new Promise<string | null>((resolve) => {
      let text = '';
      const p = spawn('openssl', ['s_client', '-connect', `${stack.host}:${stack.port}`, '-tls1_3', '-msg', '-CAfile', join(stack.pair.dir, 'ca.crt'), '-cert', creds.cert, '-key', creds.key, '-verify_return_error', '-ign_eof'], { stdio: ['pipe', 'pipe', 'pipe'] });
      p.stdout.setEncoding('latin1').on('data', (d: string) => (text += d));
      p.stderr.setEncoding('latin1').on('data', (d: string) => (text += d));
      const t = setTimeout(() => p.kill(), 15_000);
      p.on('error', () => resolve(null)); // no openssl on this machine
      p.on('exit', () => {
        clearTimeout(t);
        resolve(text);
      });
      p.stdin.end(`GET /v1/describe HTTP/1.1\r\nHost: ${stack.host}:${stack.port}\r\nConnection: close\r\n\r\n`);
    });
    skip(out === null, 'openssl is not installed: the real-client ticket count needs openssl s_client');
    // The exchange happened (a positive control for the count below), over TLS 1.3.
    expect(out).toContain('HTTP/1.1 200');
    expect(out).toMatch(/TLS 1\.3, Handshake \[length [0-9a-f]+\], Finished/);
    const tickets = (out!.match(/NewSessionTicket/g) ?? []).length + (out!.match(/New Session Ticket arrived/g) ?? []).length;
    expect(tickets).toBe(0);
  });
});
