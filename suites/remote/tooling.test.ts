// The certificate tooling (document 1 part 5 item 8), end to end as a user runs it: `hil certs` makes a
// pair, OpenSSL verifies every file it wrote, and curl and openssl s_client talk to a stack serving them.

import { execFile, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';
import { startOwnStack } from '../../harness/targets/remote.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';
import { ownStacks, SKIP } from './probe.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HIL = join(ROOT, 'harness', 'bin', 'hil.mjs');
const DAY_MS = 86_400_000;

let dir = '';
let pairDir = '';
let client: { principal: string; serial: string; cert: string; key: string };

/** `hil certs ...`: exit status 0 and one JSON line. */
async function certs(...args: string[]): Promise<Record<string, unknown>> {
  const r = await run(process.execPath, [HIL, 'certs', ...args], { cwd: ROOT });
  const lines = r.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!) as Record<string, unknown>;
}

async function openssl(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await run('openssl', args, { cwd: pairDir });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: typeof x.code === 'number' ? x.code : 1, out: x.stdout + x.stderr };
  }
}

beforeAll(async () => {
  if (!ownStacks) return;
  dir = await mkdtemp(join(tmpdir(), 'hil-certs-'));
  pairDir = join(dir, 'pair');
  await certs('create-pair', '--dir', pairDir, '--pair-id', 'cell-7');
  client = (await certs('issue-client', '--dir', pairDir, '--principal', 'operator-1')) as typeof client;
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const days = (c: X509Certificate) => (Date.parse(c.validTo) - Date.parse(c.validFrom)) / DAY_MS;

describe('hil certs', () => {
  test('create-pair makes an EC P-256 CA (3650 days, path length 0) and a server certificate (365 days) that openssl verifies', covers('rule:auth.certificate_tooling', 'limit:ca_validity_days', 'limit:server_certificate_validity_days', 'profile:certs.files'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const ca = new X509Certificate(await readFile(join(pairDir, 'ca.crt')));
    const server = new X509Certificate(await readFile(join(pairDir, 'server.crt')));
    expect(days(ca)).toBe(3650);
    expect(days(server)).toBe(365);
    expect(ca.ca).toBe(true);
    expect(ca.checkIssued(ca) && ca.verify(ca.publicKey)).toBe(true);
    expect(ca.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect((await openssl('x509', '-in', 'ca.crt', '-noout', '-text')).out).toMatch(/CA:TRUE, pathlen:0/);
    const v = await openssl('verify', '-CAfile', 'ca.crt', 'server.crt');
    expect(v.code, v.out).toBe(0);
    expect(v.out).toContain('server.crt: OK');
    expect(server.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(server.subjectAltName).toContain('DNS:localhost');
    // docs/profile.md "Certificate tooling": serials are 32 lowercase hex digits, kept in pair.json.
    const state = JSON.parse(await readFile(join(pairDir, 'pair.json'), 'utf8')) as { ca_serial: string; server_serial: string; pair_id: string };
    expect(state.pair_id).toBe('cell-7');
    for (const serial of [state.ca_serial, state.server_serial, client.serial]) expect(serial).toMatch(/^[0-9a-f]{32}$/);
    expect(ca.serialNumber.toLowerCase()).toBe(state.ca_serial);
  });

  test('issue-client makes a 365-day client certificate with exactly one svc-principal and one svc-pair URI; openssl verifies it against the CRL', covers('rule:auth.certificate_tooling', 'limit:client_certificate_validity_days'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const c = new X509Certificate(await readFile(client.cert));
    expect(days(c)).toBe(365);
    expect(c.subjectAltName).toBe('URI:svc-principal:operator-1, URI:svc-pair:cell-7');
    expect(c.checkIssued(new X509Certificate(await readFile(join(pairDir, 'ca.crt'))))).toBe(true);
    expect(c.serialNumber.toLowerCase()).toBe(client.serial);
    const v = await openssl('verify', '-crl_check', '-CAfile', 'ca.crt', '-CRLfile', 'crl.pem', client.cert);
    expect(v.code, v.out).toBe(0);
  });

  test('the CRL is valid 7 days; revoke lists the serial and openssl then refuses the certificate', covers('rule:auth.certificate_tooling', 'limit:crl_validity_days'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const other = (await certs('issue-client', '--dir', pairDir, '--principal', 'operator-2')) as typeof client;
    const revoked = await certs('revoke', '--dir', pairDir, '--serial', other.serial);
    expect(revoked.serial).toBe(other.serial);
    const text = (await openssl('crl', '-in', 'crl.pem', '-noout', '-text')).out;
    const last = Date.parse(/Last Update: (.*)/.exec(text)![1]!);
    const next = Date.parse(/Next Update: (.*)/.exec(text)![1]!);
    expect((next - last) / DAY_MS).toBe(7);
    expect(text).toMatch(/X509v3 CRL Number:\s*\n\s*\d+/);
    expect(text.toLowerCase()).toContain(other.serial.toLowerCase());
    const v = await openssl('verify', '-crl_check', '-CAfile', 'ca.crt', '-CRLfile', 'crl.pem', other.cert);
    expect(v.code).not.toBe(0);
    expect(v.out).toContain('certificate revoked');
    // The first client is unaffected.
    expect((await openssl('verify', '-crl_check', '-CAfile', 'ca.crt', '-CRLfile', 'crl.pem', client.cert)).code).toBe(0);
  });

  test('curl and openssl s_client reach a stack serving the pair', covers('rule:auth.certificate_tooling', 'rule:transport.remote_listener'), async ({ skip }) => {
    skip(!ownStacks, SKIP);
    const f = (n: string) => join(pairDir, n);
    // Stopped here, not after the file: on a recorded or replayed run the stack is one of this test's variants.
    const stack = await startOwnStack(['--remote-listen', '127.0.0.1:0', '--remote-ca', f('ca.crt'), '--remote-cert', f('server.crt'), '--remote-key', f('server.key'), '--remote-crl', f('crl.pem'), '--pair-id', 'cell-7']);
    try {
      const port = stack.ready.remote!.split(':')[1]!;
      const curl = await run('curl', ['-sS', '--fail', '--cacert', f('ca.crt'), '--cert', client.cert, '--key', client.key, `https://127.0.0.1:${port}/v1/describe`]);
      expect(curl.stdout).toContain('"pair_id":"cell-7"');
      // By name too: the server certificate names localhost.
      const byName = await run('curl', ['-sS', '--fail', '--cacert', f('ca.crt'), '--cert', client.cert, '--key', client.key, '--resolve', `localhost:${port}:127.0.0.1`, `https://localhost:${port}/v1/status`]);
      expect(byName.stdout).toContain('"operation":"status"');

      const out = await new Promise<string>((resolve, reject) => {
        const p = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-tls1_3', '-CAfile', f('ca.crt'), '-cert', client.cert, '-key', client.key, '-verify_return_error', '-quiet', '-ign_eof'], { stdio: ['pipe', 'pipe', 'pipe'] });
        let text = '';
        p.stdout.setEncoding('latin1').on('data', (d: string) => (text += d));
        p.stderr.setEncoding('latin1').on('data', (d: string) => (text += d));
        const t = setTimeout(() => p.kill(), 15_000);
        p.on('error', reject);
        p.on('exit', () => {
          clearTimeout(t);
          resolve(text);
        });
        p.stdin.end('GET /v1/describe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
      });
      expect(out).toContain('HTTP/1.1 200');
      expect(out).toContain('"operation":"describe"');
    } finally {
      await stack.stop();
    }
  });
});
