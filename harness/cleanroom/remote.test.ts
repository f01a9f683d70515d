// The clean-room service's remote listener (harness/cleanroom/remote.ts, credentials.ts, connections.ts):
// its own quick checks on loopback and temporary directories. The remote suites judge it in
// `hil cleanroom check`; these pin the pieces that decide a verdict there (the credential checks, the
// gates, sessions owned per transport, reloads) and the bounds' mechanics with short bounds, never a
// duration.

import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { clientFiles, createPair, issueClient, loadIssuer, makeIntermediate, newKey, renewCrl, revokeSerial, writeAtomic, type PairFiles } from '../certs.ts';
import { ControlClient } from '../clients/control.ts';
import { checkGrant } from '../oracle/reply.ts';
import { watchConnections } from './connections.ts';
import { CredentialError, crlNotCurrent, judgeClient, loadCredentials } from './credentials.ts';
import { NO_TICKETS_CNF } from './remote.ts';
import { CleanroomService, serveCleanroom } from './service.ts';

const PAIR = 'unit-pair';
let dir: string;
let pair: PairFiles;
let service: CleanroomService;
let origin: string;
const logged: string[] = [];
const clients: ControlClient[] = [];

const files = () => ({ ca: pair.ca, cert: pair.cert, key: pair.key, crl: pair.crl });

async function remoteClient(principal: string): Promise<ControlClient> {
  await issueClient({ dir: pair.dir, principal });
  const f = clientFiles(pair.dir, principal);
  const c = ControlClient.https({ origin, cert: readFileSync(f.cert, 'utf8'), key: readFileSync(f.key, 'utf8'), ca: readFileSync(pair.ca, 'utf8') });
  clients.push(c);
  return c;
}

/** One TLS connection with `principal`'s files (or none) sending one request: what came back. */
function probe(principal?: string): Promise<{ bytes: string; secure: boolean }> {
  const f = principal ? clientFiles(pair.dir, principal) : undefined;
  const port = Number(new URL(origin).port);
  return new Promise((resolve) => {
    let bytes = '';
    let secure = false;
    const s = tlsConnect({ host: '127.0.0.1', port, ca: readFileSync(pair.ca, 'utf8'), ...(f ? { cert: readFileSync(f.cert, 'utf8'), key: readFileSync(f.key, 'utf8') } : {}) });
    s.on('secureConnect', () => {
      secure = true;
      s.write('GET /v1/describe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    });
    s.setEncoding('latin1').on('data', (d: string) => (bytes += d));
    s.on('error', () => undefined);
    s.on('close', () => resolve({ bytes, secure }));
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hil-cleanroom-remote-'));
  pair = await createPair({ dir: join(dir, 'pair'), pairId: PAIR });
  service = new CleanroomService({ socketDir: join(dir, 'sock'), pairId: PAIR, leaseCeilingMs: 5000, remote: { host: '127.0.0.1', port: 0, files: files() }, log: (l) => logged.push(l) });
  await service.listen();
  origin = `https://${service.remoteAddress}`;
});

afterAll(async () => {
  for (const c of clients.splice(0)) await c.close();
  await service?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('a certificate of the pair reaches the same service over HTTPS: Describe names --pair-id in the binding', async () => {
  const c = await remoteClient('alice');
  const d = await c.describe();
  expect(d.status).toBe(200);
  expect((d.reply.data as { binding: { pair_id: string } }).binding.pair_id).toBe(PAIR);
});

test('sessions belong to their transport and principal: session_principal_mismatch for everyone else, before any replay', async () => {
  const alice = await remoteClient('alice');
  const bob = await remoteClient('bob');
  const local = new ControlClient(service.socketPath);
  clients.push(local);
  const binding = ((await alice.describe()).reply.data as { binding: Record<string, unknown> }).binding;
  const g = checkGrant((await alice.op('acquire', { controller: 'unit', binding })).reply.data);
  const fence = { session: g.session, generation: g.generation };
  expect((await alice.op('renew', { ...fence, request_id: 'r-1' })).status).toBe(200);
  // The request_id alice used is not replayed to bob: ownership is judged first.
  for (const other of [bob, local]) expect((await other.op('renew', { ...fence, request_id: 'r-1' })).label).toBe('session_principal_mismatch');
  expect((await alice.op('release', fence)).status).toBe(200);
  // Ended, it answers by its state to anyone (the header table of service.ts).
  expect((await bob.op('renew', fence)).label).toBe('control_session_stale');

  const l = checkGrant((await local.op('acquire', { controller: 'unit', binding })).reply.data);
  expect((await alice.op('renew', { session: l.session, generation: l.generation })).label).toBe('session_principal_mismatch');
  expect((await local.op('release', { session: l.session, generation: l.generation })).status).toBe(200);
});

test('resources are remote only: any SHA-256 is 404 resource_unknown there, other text and the Unix socket unknown_endpoint', async () => {
  const c = await remoteClient('alice');
  const local = new ControlClient(service.socketPath);
  clients.push(local);
  const digest = 'ab'.repeat(32);
  for (const d of [digest, digest.toUpperCase()]) {
    const r = await c.get(`/v1/resources/${d}`, 'resource');
    expect([r.status, r.label]).toEqual([404, 'resource_unknown']);
  }
  expect((await c.get(`/v1/resources/sha256:${digest}`)).label).toBe('unknown_endpoint');
  expect((await local.get(`/v1/resources/${digest}`)).label).toBe('unknown_endpoint');
  // GET /v1/jog is the jog WebSocket remotely (update_jog), jog_status locally: both unimplemented here.
  expect((await c.get('/v1/jog')).reply.operation).toBe('update_jog');
  expect((await local.get('/v1/jog')).reply.operation).toBe('jog_status');
});

test('refused handshakes get no HTTP byte and one log line each: no certificate, another pair, an intermediate, a revoked serial', async () => {
  await issueClient({ dir: pair.dir, principal: 'x', uris: ['svc-principal:x', 'svc-pair:other-pair'], name: 'other-pair' });
  await issueClient({ dir: pair.dir, principal: 'y', issuer: await makeIntermediate(await loadIssuer(pair.dir), 'unit intermediate'), name: 'via-intermediate' });
  const revoked = await issueClient({ dir: pair.dir, principal: 'revoked' });
  await revokeSerial(pair.dir, revoked.serial);
  for (const [who, why] of [[undefined, /no client certificate/], ['other-pair', /is for pair other-pair/], ['via-intermediate', /not issued directly by the CA/], ['revoked', /revoked by the CRL/]] as const) {
    const from = logged.length;
    const r = await probe(who);
    expect(r.bytes, String(who)).toBe('');
    expect(logged.slice(from).filter((l) => / refused: /.test(l)), String(who)).toEqual([expect.stringMatching(why)]);
  }
  expect((await probe('alice')).bytes).toMatch(/^HTTP\/1\.1 200 /);
});

test('a changed file is loaded again before the next handshake; a failed load refuses every handshake until the files load, open connections kept', async () => {
  const kept = await remoteClient('carol');
  expect((await kept.status()).status).toBe(200);
  const saved = readFileSync(pair.crl);
  const from = logged.length;
  await writeAtomic(pair.crl, '-----BEGIN X509 CRL-----\nnot a crl\n-----END X509 CRL-----\n');
  for (let i = 0; i < 2; i++) expect((await probe('alice')).bytes).toBe('');
  expect(logged.slice(from).filter((l) => /load failed/.test(l))).toHaveLength(1);
  expect(logged.slice(from).filter((l) => /refused: credentials not loaded/.test(l))).toHaveLength(2);
  expect((await kept.status()).status).toBe(200);
  await writeAtomic(pair.crl, saved);
  expect((await probe('alice')).bytes).toMatch(/^HTTP\/1\.1 200 /);
  expect(logged.slice(from).some((l) => /loaded again/.test(l))).toBe(true);
});

test('a CRL outside its window refuses the handshake before any TLS byte, with "remote CRL not current" in the log', async () => {
  const day = 86_400_000;
  await renewCrl({ dir: pair.dir, thisUpdate: new Date(Date.now() - 8 * day), nextUpdate: new Date(Date.now() - day) });
  const from = logged.length;
  const r = await probe('alice');
  expect([r.secure, r.bytes]).toEqual([false, '']);
  expect(logged.slice(from).join('\n')).toMatch(/refused: remote CRL not current/);
  await renewCrl({ dir: pair.dir });
  expect((await probe('alice')).bytes).toMatch(/^HTTP\/1\.1 200 /);
});

test('the credential checks: one self-signed CA, a matching key, a CRL of the CA with understood critical extensions, its window', async () => {
  const other = await createPair({ dir: join(dir, 'other'), pairId: 'other-pair' });
  const creds = loadCredentials(files());
  const bad = (o: Partial<ReturnType<typeof files>>) => () => loadCredentials({ ...files(), ...o });
  const two = join(dir, 'two-cas.crt');
  writeFileSync(two, readFileSync(pair.ca, 'utf8') + readFileSync(other.ca, 'utf8'));
  expect(bad({ ca: two })).toThrow(/not exactly one CERTIFICATE/);
  expect(bad({ ca: pair.cert })).toThrow(/not a CA/);
  expect(bad({ key: other.key })).toThrow(/does not match/);
  expect(bad({ crl: other.crl })).toThrow(/not by the CA|not signed by the CA/);
  expect(bad({ crl: join(dir, 'absent.pem') })).toThrow(CredentialError);
  const scratch = await createPair({ dir: join(dir, 'scratch'), pairId: PAIR });
  await renewCrl({ dir: scratch.dir, signingKey: (await newKey()).privateKey });
  expect(() => loadCredentials({ ca: scratch.ca, cert: scratch.cert, key: scratch.key, crl: scratch.crl })).toThrow(/not signed by the CA/);
  await renewCrl({ dir: scratch.dir, unsupportedCritical: true });
  expect(() => loadCredentials({ ca: scratch.ca, cert: scratch.cert, key: scratch.key, crl: scratch.crl })).toThrow(/unsupported critical extension/);
  expect(crlNotCurrent(creds.crl, new Date(creds.crl.thisUpdate.getTime() - 1))).toMatch(/^remote CRL not current/);
  expect(crlNotCurrent(creds.crl, new Date(creds.crl.nextUpdate.getTime() + 1))).toMatch(/^remote CRL not current/);
  expect(crlNotCurrent(creds.crl, new Date())).toBeUndefined();
  // Identity (part 5 item 3): exactly one of each URI, tokens, the service's pair.
  const judge = async (name: string, uris: string[]) => {
    await issueClient({ dir: pair.dir, principal: 'z', uris, name });
    return judgeClient(new X509Certificate(readFileSync(clientFiles(pair.dir, name).cert)), loadCredentials(files()), PAIR, new Date());
  };
  expect(await judge('ok', ['svc-principal:op.1', `svc-pair:${PAIR}`, 'https://example.invalid/'])).toMatchObject({ principal: 'op.1', pair: PAIR });
  expect(await judge('two', ['svc-principal:a', 'svc-principal:b', `svc-pair:${PAIR}`])).toMatch(/2 principals/);
  expect(await judge('none', [`svc-pair:${PAIR}`])).toMatch(/0 principals/);
  expect(await judge('space', ['svc-principal:a b', `svc-pair:${PAIR}`])).toMatch(/not a token/);
});

test('start-up: a failed check of the files is exit status 2, before anything listens', async () => {
  const other = await createPair({ dir: join(dir, 'exit2'), pairId: PAIR });
  const code = await serveCleanroom({ socketDir: join(dir, 'exit2-sock'), pairId: PAIR, remote: { host: '127.0.0.1', port: 0, files: { ...files(), key: other.key } }, log: () => undefined });
  expect(code).toBe(2);
});

test('hil cleanroom serve: --remote-listen needs the four files and --pair-id and takes HOST:PORT, HOST or :PORT; the files and the jog clock flags need it, those as uint64 (usage errors, exit 2)', async () => {
  const { cleanroom } = await import('../cli/cleanroom.ts');
  const { UsageError } = await import('../cli/common.ts');
  const serve = ['serve', '--socket-dir', join(dir, 'usage')];
  const all = ['--remote-ca', pair.ca, '--remote-cert', pair.cert, '--remote-key', pair.key, '--remote-crl', pair.crl];
  for (const args of [
    ['--remote-listen', '127.0.0.1:0', ...all],
    ['--remote-listen', '127.0.0.1:0', '--pair-id', PAIR, ...all.slice(2)],
    ['--remote-listen', '127.0.0.1:65536', '--pair-id', PAIR, ...all],
    ['--remote-listen', '127.0.0.1:0', '--pair-id', 'a pair', ...all],
    ['--remote-listen', '127.0.0.1:0', '--pair-id', PAIR, '--link-profile', 'wan', ...all],
    ['--remote-crl', pair.crl],
    // The remote jog clock flags (part 5 item 6): beside --remote-listen, decimal uint64 values.
    ['--remote-jog-drift-ppb', '1'],
    ['--remote-listen', '127.0.0.1:0', '--pair-id', PAIR, ...all, '--remote-jog-max-uncertainty-ns', '1e6'],
    ['--remote-listen', '127.0.0.1:0', '--pair-id', PAIR, ...all, '--remote-jog-calibration-max-age-ns', '18446744073709551616'],
  ]) {
    await expect(cleanroom([...serve, ...args]), args.join(' ')).rejects.toThrow(UsageError);
  }
});

test('no NewSessionTicket under harness/cleanroom/no-tickets.cnf; Node sends them without it', () => {
  // A node of its own for each: the configuration is read when the process starts.
  const script = `import { ticketsDisabled } from ${JSON.stringify(new URL('./remote.ts', import.meta.url).href)};
    import { readFileSync } from 'node:fs';
    process.stdout.write(String(await ticketsDisabled({ cert: readFileSync(${JSON.stringify(pair.cert)}, 'utf8'), key: readFileSync(${JSON.stringify(pair.key)}, 'utf8') })));`;
  const run = (flags: string[]) => spawnSync(process.execPath, [...flags, '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, OPENSSL_CONF: '' } });
  const off = run([`--openssl-config=${NO_TICKETS_CNF}`]);
  expect(off.stdout, off.stderr).toBe('true');
  const on = run([]);
  expect(on.stdout, on.stderr).toBe('false');
});

test('the connection watch closes a kept connection once idle, and cuts a reply its client stopped reading', async () => {
  const big = Buffer.alloc(32 * 1024 * 1024, 0x61);
  const server = createServer({ keepAliveTimeout: 0 }, (req, res) => res.end(req.url === '/big' ? big : 'ok'));
  const unwatch = watchConnections(server, { idleMs: 200, replyMs: 200, checkMs: 20 });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  try {
    /** One request on a connection the client never closes; resolves when the server has closed it. */
    const exchange = async (path: string, read: boolean) => {
      const accepted = once(server, 'connection') as Promise<[Socket]>;
      const s = netConnect(port, '127.0.0.1');
      s.on('error', () => undefined);
      let text = '';
      s.setEncoding('latin1').on('data', (d: string) => {
        text += d;
        if (!read) s.pause();
      });
      s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      const [theirs] = await accepted;
      await once(theirs, 'close');
      s.destroy();
      return text;
    };
    expect(await exchange('/small', true)).toMatch(/^HTTP\/1\.1 200 [\s\S]*ok$/);
    expect((await exchange('/big', false)).length).toBeLessThan(big.length);
  } finally {
    unwatch();
    server.closeAllConnections();
    server.close();
  }
});
