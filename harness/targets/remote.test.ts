// Someone else's remote listener (harness/targets/remote.ts, the external target's remoteListener): the
// usage errors of its options, which stacks a remote suite may take from it and why not, and the stack the
// suites get: the address of the URL, the pair directory's files and pair id, no stepped clock, and only
// the log lines written after it was opened; and the binding the suites acquire with where Describe reports
// none (harness/targets/binding.ts).

import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { applyTargetFlags } from '../cli/run-target.ts';
import { UsageError } from '../cli/common.ts';
import { clientFiles, createPair } from '../certs.ts';
import { TARGETS, validate } from './index.ts';
import { cannotStartRemote, serviceStart, startRemoteStack, type ServiceStart } from './remote.ts';
import { describedBinding, withBinding } from './binding.ts';
import type { TargetDescriptor } from './types.ts';

const dir = mkdtempSync(join(tmpdir(), 'hil-remote-test-'));
const pairDir = join(dir, 'pair');
const log = join(dir, 'service.log');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(async () => {
  await createPair({ dir: pairDir, pairId: 'cell-ext-07' });
  writeFileSync(log, 'remote: listening on 127.0.0.1:9443\n');
});

const usage = async (values: Record<string, string>): Promise<string> => {
  const e = await applyTargetFlags('external', { socket: dir, ...values }, {}).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e, JSON.stringify(values)).toBeInstanceOf(UsageError);
  return (e as Error).message;
};

const ext = (more: Record<string, string> = {}): NodeJS.ProcessEnv => ({ HIL_TARGET: 'external', HIL_SOCKET: join(dir, 'control.sock'), ...more });
const listening = (more: Record<string, string> = {}) => ext({ HIL_REMOTE_URL: 'https://127.0.0.1:9443', HIL_REMOTE_PAIR: pairDir, ...more });

describe('the external target’s remote listener options', () => {
  test('each half without the other, an address that is not https://HOST:PORT, a directory that is no pair and an unknown link profile are usage errors', async () => {
    expect(await usage({ 'remote-pair': pairDir })).toBe('--remote-pair needs --remote-url URL: the listener that serves the pair');
    expect(await usage({ 'remote-url': 'https://127.0.0.1:9443' })).toBe('--remote-url needs --remote-pair DIR: the pair directory (hil certs create-pair) whose files the listener serves');
    expect(await usage({ 'remote-link-profile': 'lan' })).toBe('--remote-link-profile needs --remote-url URL: the listener it describes');
    for (const url of ['http://127.0.0.1:9443', 'https://127.0.0.1', 'https://127.0.0.1:0', 'https://127.0.0.1:65536', 'https://127.0.0.1:9443/v1']) {
      expect(await usage({ 'remote-url': url, 'remote-pair': pairDir })).toBe(`--remote-url ${url}: not https://HOST:PORT`);
    }
    expect(await usage({ 'remote-url': 'https://127.0.0.1:9443', 'remote-pair': dir })).toBe(`--remote-pair ${dir}: no pair.json (make the directory with hil certs create-pair and start the listener on its files)`);
    expect(await usage({ 'remote-url': 'https://127.0.0.1:9443', 'remote-pair': pairDir, 'remote-link-profile': 'wan' })).toBe('--remote-link-profile wan: lan or internet');
    expect(await usage({ 'remote-resource': log })).toBe('--remote-resource needs --remote-url URL: the listener that serves it');
    expect(await usage({ 'remote-url': 'https://127.0.0.1:9443', 'remote-pair': pairDir, 'remote-resource': join(dir, 'absent.urdf') })).toBe(`--remote-resource ${join(dir, 'absent.urdf')}: no such file`);
    expect(await usage({ 'remote-url': 'https://127.0.0.1:9443', 'remote-pair': pairDir, 'remote-resource': pairDir })).toBe(`--remote-resource ${pairDir}: no such file`);
    const env: NodeJS.ProcessEnv = {};
    await applyTargetFlags('external', { socket: dir, 'remote-url': 'https://localhost:9443/', 'remote-pair': pairDir, 'remote-link-profile': 'internet', 'service-log': log }, env);
    expect(env).toMatchObject({ HIL_REMOTE_URL: 'https://localhost:9443/', HIL_REMOTE_PAIR: pairDir, HIL_REMOTE_LINK_PROFILE: 'internet', HIL_SERVICE_LOG: log });
  });

  test('a descriptor that both starts remote stacks and reaches someone else’s is refused', () => {
    const all = { ...TARGETS } as Record<string, TargetDescriptor<object>>;
    all.sim = { ...all.sim!, remoteListener: () => 'x' };
    expect(() => validate(all as typeof TARGETS)).toThrow("target descriptor sim both starts remote listener stacks and reaches someone else's");
  });
});

describe('which remote stacks the suites may take from it', () => {
  test('none without --remote-url; with it, a cycle-free stack of its link profile, and nothing the test would have had to start', () => {
    expect(cannotStartRemote({ cycleFree: true }, ext())).toBe('target external reaches no remote listener: give --remote-url URL and --remote-pair DIR (README "Your own remote listener")');
    expect(cannotStartRemote({}, listening())).toBeUndefined();
    expect(cannotStartRemote({ cycleFree: true, linkProfile: 'lan' }, listening())).toBeUndefined();
    expect(cannotStartRemote({ pairId: 'cell-ext-07' }, listening())).toBeUndefined();
    expect(cannotStartRemote({ linkProfile: 'internet' }, listening())).toBe("target external's remote listener serves a cell on the lan link profile (--remote-link-profile), not internet");
    expect(cannotStartRemote({ linkProfile: 'internet' }, listening({ HIL_REMOTE_LINK_PROFILE: 'internet' }))).toBeUndefined();
    expect(cannotStartRemote({ linkProfile: 'lan' }, listening({ HIL_REMOTE_LINK_PROFILE: 'internet' }))).toBe("target external's remote listener serves a cell on the internet link profile (--remote-link-profile), not lan");
    const refused = 'target external reaches a remote listener someone else started: it cannot start one with';
    expect(cannotStartRemote({ cycleFree: true, args: ['--machine', 'm.json'] }, listening())).toBe(`${refused} hil serve flags --machine m.json`);
    expect(cannotStartRemote({ variant: { clock: 'stepped' } }, listening())).toBe(`${refused} the stepped clock`);
    expect(cannotStartRemote({ pairId: 'cell-b' }, listening())).toBe(`${refused} pair id cell-b`);
    expect(cannotStartRemote({ env: { HIL_X: '1' } }, listening())).toBe(`${refused} environment HIL_X`);
  });

  test('the sim target starts its own; a rig starts none', () => {
    expect(cannotStartRemote({ cycleFree: true }, { HIL_TARGET: 'sim' })).toBeUndefined();
    expect(cannotStartRemote({ cycleFree: true }, { HIL_TARGET: 'rig' })).toMatch(/^target rig cannot start a stack with a remote listener/);
  });
});

/** A listener on the pair's files that answers Describe to a client of the pair (the principals it saw kept). */
async function listener(): Promise<{ server: Server; port: number; principals: string[] }> {
  const f = (n: string) => readFileSync(join(pairDir, n));
  const principals: string[] = [];
  const server = createServer({ key: f('server.key'), cert: f('server.crt'), ca: f('ca.crt'), requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' }, (req, res) => {
    const uri = /svc-principal:([^,\s]+)/.exec((req.socket as import('node:tls').TLSSocket).getPeerCertificate().subjectaltname ?? '');
    principals.push(uri?.[1] ?? '');
    res.setHeader('content-type', 'application/json');
    res.end('{"schema":"svc.rt-control.response.v1","operation":"describe","data":{}}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, principals };
}

describe('the stack the suites get', () => {
  test('a listener that does not answer a client of the pair is the run’s error, before any test', async () => {
    vi.stubEnv('HIL_TARGET', 'external');
    for (const [k, v] of Object.entries(listening())) vi.stubEnv(k, v!);
    const { server, port } = await listener();
    await new Promise((r) => server.close(r));
    vi.stubEnv('HIL_REMOTE_URL', `https://127.0.0.1:${port}`);
    try {
      await expect(startRemoteStack({})).rejects.toThrow(new RegExp(`^HIL_ERR_TARGET_START: no remote listener answers GET /v1/describe at https://127.0.0.1:${port} for a client certificate of pair cell-ext-07`));
    } finally {
      vi.unstubAllEnvs();
    }
  });

  test('its address from the URL, the pair directory’s files and pair id, clients issued there, no stepped clock, the log from its opening on', async () => {
    const { server, port, principals } = await listener();
    vi.stubEnv('HIL_TARGET', 'external');
    for (const [k, v] of Object.entries(listening({ HIL_REMOTE_URL: `https://localhost:${port}/`, HIL_SERVICE_LOG: log }))) vi.stubEnv(k, v!);
    try {
      const s = await startRemoteStack({ cycleFree: true });
      // It asked the listener for Describe with a client of the pair before handing the stack over.
      expect(principals).toEqual(['hil-reach']);
      try {
        expect([s.host, s.port, s.origin]).toEqual(['localhost', port, `https://localhost:${port}`]);
        expect(s.pair).toMatchObject({ dir: pairDir, pair_id: 'cell-ext-07', ca: join(pairDir, 'ca.crt'), crl: join(pairDir, 'crl.pem'), key: join(pairDir, 'server.key') });
        expect(s.stepped).toBe(false);
        await expect(s.step(1)).rejects.toThrow(/^HIL_ERR_TARGET_NO_ABILITY: the external target's remote listener has no stepped clock/);
        expect(() => s.beginStop()).toThrow(/HIL_ERR_TARGET_NO_ABILITY/);
        expect(s.logged).toBe(true);
        expect(s.stderr()).toBe('');
        appendFileSync(log, 'remote: refused handshake from 127.0.0.1:5: no client certificate\n');
        expect(s.stderr()).toBe('remote: refused handshake from 127.0.0.1:5: no client certificate\n');
        const c = await s.creds('viewer-9');
        expect(c.cert).toContain('BEGIN CERTIFICATE');
        expect(c.cert).toBe(await import('node:fs').then((fs) => fs.readFileSync(clientFiles(pairDir, 'viewer-9').cert, 'utf8')));
        expect([c.host, c.port]).toEqual(['localhost', port]);
      } finally {
        await s.stop();
      }
      vi.stubEnv('HIL_SERVICE_LOG', '');
      const quiet = await startRemoteStack({});
      expect([quiet.logged, quiet.stderr(), quiet.knownResource]).toEqual([false, '', undefined]);
      await quiet.stop();
      // The resource file the run names is read when the stack is opened: its bytes, as they are.
      const resource = join(dir, 'arm.urdf');
      writeFileSync(resource, Buffer.from([0, 1, 2, 255, 10]));
      vi.stubEnv('HIL_REMOTE_RESOURCE', resource);
      const withResource = await startRemoteStack({});
      expect(withResource.knownResource).toEqual(Buffer.from([0, 1, 2, 255, 10]));
      await withResource.stop();
    } finally {
      vi.unstubAllEnvs();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('the binding the suites acquire with', () => {
  const described = () => ({ configuration_sha256: 'c'.repeat(64), machine_sha256: 'm'.repeat(64) });
  test("Describe's own when it reports one; else the run's pair id and revision with Describe's digests, marked as supplied; neither is the run's error", () => {
    const own = { ...described(), binding: { pair_id: 'cell-9', revision: 4n, configuration_sha256: 'x'.repeat(64) } };
    expect(withBinding(own, ext({ HIL_PAIR_ID: 'other', HIL_PAIR_REVISION: '7' })).binding).toEqual(own.binding);
    expect(describedBinding(own)).toBe(true);
    const bare = withBinding(described(), ext({ HIL_PAIR_ID: 'cell-ext-07', HIL_PAIR_REVISION: '18446744073709551615' }));
    expect(bare.binding).toEqual({ pair_id: 'cell-ext-07', revision: 18446744073709551615n, configuration_sha256: 'c'.repeat(64), machine_sha256: 'm'.repeat(64) });
    expect(describedBinding(bare)).toBe(false);
    expect(() => withBinding(described(), ext())).toThrow(/^HIL_ERR_TARGET_OPTION: Describe reports no binding .* give --pair-id ID and --pair-revision N/);
    expect(() => withBinding({}, ext({ HIL_PAIR_ID: 'a', HIL_PAIR_REVISION: '1' }))).toThrow(/no configuration_sha256/);
  });

  test('--pair-id and --pair-revision go together, the revision a nonzero uint64', async () => {
    expect(await usage({ 'pair-id': 'cell-1' })).toBe('--pair-id and --pair-revision go together: the binding needs both (document 1 part 2)');
    expect(await usage({ 'pair-revision': '2' })).toBe('--pair-id and --pair-revision go together: the binding needs both (document 1 part 2)');
    for (const r of ['0', '-1', '1.5', '18446744073709551616', 'x']) expect(await usage({ 'pair-id': 'cell-1', 'pair-revision': r })).toBe(`--pair-revision ${r}: a nonzero uint64 (document 1 part 2 Binding)`);
    const env: NodeJS.ProcessEnv = {};
    await applyTargetFlags('external', { socket: dir, 'pair-id': 'cell-1', 'pair-revision': '18446744073709551615' }, env);
    expect(env).toMatchObject({ HIL_PAIR_ID: 'cell-1', HIL_PAIR_REVISION: '18446744073709551615' });
  });
});

describe('starting the service with flags of a test (the start-up checks)', () => {
  test("the reference stack where the target starts stacks; someone else's by --serve-command, {socket_dir} replaced and quoted, the flags appended; none without it", async () => {
    const own = serviceStart({ HIL_TARGET: 'sim' });
    const ownStart = (own as ServiceStart).spawn('/tmp/s', ['--pair-id', 'x']);
    expect(ownStart.file).toBe(process.execPath);
    const ownArgs = ownStart.args;
    expect(ownArgs.slice(-5)).toEqual(['--socket-dir', '/tmp/s', '--lifeline-stdin', '--pair-id', 'x']);
    expect(serviceStart(ext())).toBe('target external starts no service of its own: give --serve-command CMD, {socket_dir} standing for its socket directory (README "Your own remote listener")');
    expect(serviceStart({ HIL_TARGET: 'rig' })).toBe("target rig cannot start a service with flags of a test's choosing");
    const theirs = serviceStart(ext({ HIL_SERVE_COMMAND: 'my-service --socket {socket_dir}/control.sock' })) as ServiceStart;
    const s = theirs.spawn("/tmp/it's here", ['--remote-listen', '127.0.0.1:0', '--pair-id', 'a b']);
    expect([s.file, ...s.args]).toEqual(['/bin/sh', '-c', `my-service --socket '/tmp/it'\\''s here'/control.sock "$@"`, 'sh', '--remote-listen', '127.0.0.1:0', '--pair-id', 'a b']);
    // The shell passes the directory and every flag through as one word each.
    const { execFileSync } = await import('node:child_process');
    const echo = (serviceStart(ext({ HIL_SERVE_COMMAND: "printf '%s|' {socket_dir}" })) as ServiceStart).spawn("/tmp/it's here", ['--pair-id', 'a b']);
    expect(execFileSync(echo.file, echo.args, { encoding: 'utf8' })).toBe("/tmp/it's here|--pair-id|a b|");
    expect(await usage({ 'serve-command': 'my-service' })).toBe('--serve-command my-service: name the service\'s socket directory as {socket_dir}, so that each start has a directory of its own');
  });
});

describe('a service started for a test with flags of its own (started: the remote jog clock flags)', () => {
  test('on the external target only through --serve-command, and never with a clock, machine or environment of the test’s choosing', () => {
    const serving = (more: Record<string, string> = {}) => listening({ HIL_SERVE_COMMAND: 'my-service --socket-dir {socket_dir}', ...more });
    expect(cannotStartRemote({ started: true, args: ['--remote-jog-drift-ppb', '1'] }, serving())).toBeUndefined();
    expect(cannotStartRemote({ started: true, args: [] }, ext({ HIL_SERVE_COMMAND: 'my-service --socket-dir {socket_dir}' }))).toBeUndefined();
    const refused = "target external starts someone else's service through --serve-command: it cannot give it";
    expect(cannotStartRemote({ started: true, variant: { clock: 'stepped' } }, serving())).toBe(`${refused} the stepped clock`);
    expect(cannotStartRemote({ started: true, env: { HIL_X: '1' } }, serving())).toBe(`${refused} environment HIL_X`);
    // Without the command the flags cannot be given: the listener the run reaches is as its owner started it.
    expect(cannotStartRemote({ started: true, args: ['--remote-jog-drift-ppb', '1'] }, listening())).toBe('target external starts no service of its own: give --serve-command CMD, {socket_dir} standing for its socket directory (README "Your own remote listener")');
    // The sim target starts its own, stepped or not.
    expect(cannotStartRemote({ started: true, variant: { clock: 'stepped' } }, { HIL_TARGET: 'sim' })).toBeUndefined();
  });

  test('the command runs with a remote listener on a fresh pair and the test’s flags; ready once the listener answers Describe; stopped with its process group', async () => {
    const hil = join(process.cwd(), 'harness', 'bin', 'hil.mjs');
    vi.stubEnv('HIL_TARGET', 'external');
    for (const [k, v] of Object.entries(ext({ HIL_SERVE_COMMAND: `node ${hil} serve --socket-dir {socket_dir}` }))) vi.stubEnv(k, v!);
    try {
      const s = await startRemoteStack({ started: true, pairId: 'cell-served-3', args: ['--remote-jog-drift-ppb', '7'] });
      try {
        expect(s.stepped).toBe(false);
        await expect(s.step(1)).rejects.toThrow(/^HIL_ERR_TARGET_NO_ABILITY: a service started through --serve-command has no stepped clock/);
        expect(s.pair.pair_id).toBe('cell-served-3');
        expect(s.host).toBe('127.0.0.1');
        // Its remote listener answers a client of the fresh pair, and its control socket the local transport.
        const remote = await s.client('alice');
        const d = await remote.describe();
        expect(d.status).toBe(200);
        // The pair flags reached it: its binding names the pair id of the fresh pair.
        expect((d.reply.data as { binding?: { pair_id?: string } }).binding?.pair_id).toBe('cell-served-3');
        const local = await s.local().describe();
        expect(local.status).toBe(200);
        expect(s.logged).toBe(true);
      } finally {
        await s.stop();
      }
      // Stopped: nobody answers on its port any more.
      const { connect } = await import('node:net');
      const refused = await new Promise<boolean>((r) => connect(s.port, '127.0.0.1').once('connect', () => r(false)).once('error', () => r(true)));
      expect(refused).toBe(true);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  test('a command that exits before its listener answers is the test’s HIL_ERR_TARGET_START, with the end of its output', async () => {
    vi.stubEnv('HIL_TARGET', 'external');
    for (const [k, v] of Object.entries(ext({ HIL_SERVE_COMMAND: "echo 'no such cell' >&2; exit 3; : {socket_dir}" }))) vi.stubEnv(k, v!);
    try {
      await expect(startRemoteStack({ started: true, args: [] })).rejects.toThrow(/^HIL_ERR_TARGET_START: --serve-command with a remote listener exited with status 3 before it answered: no such cell$/);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});
