// Start-up checks of the remote listener (document 1 part 5 item 6): with --remote-listen, --remote-ca
// (exactly one self-signed CA), --remote-cert, --remote-key, --remote-crl and --pair-id are all required
// and checked; any failed check exits with status 2. That it says so in one clear line on stderr, and in
// which words, is docs/profile.md's ("Remote listener"), as are the checks of flags given without
// --remote-listen and the jog flags' number format. Someone else's service is started by the command the
// run names (--serve-command, harness/targets/remote.ts serviceStart).

import { spawn } from 'node:child_process';
import { connect as netConnect } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { certPem, createPair, issueClient, crlPem, loadIssuer, makeCrl, makeIntermediate, newKey, type PairFiles } from '../../harness/certs.ts';
import { serviceStart } from '../../harness/targets/remote.ts';
import { HarnessError } from '../../harness/errors.ts';
import { limit } from '../../harness/catalogue/index.ts';
import { covers, describe, expect, inProfile, test } from '../../harness/fixture.ts';
import { probe } from './probe.ts';

/** `--remote-listen` without a port listens on this one (the catalogue's remote_default_port). */
const DEFAULT_PORT = Number(limit('remote_default_port').value);

/** How this run starts the service with flags of its own, or why it cannot. */
const start = serviceStart();


let dir = '';
let pair: PairFiles;
let other: PairFiles;
const bad: Record<string, string> = {};

beforeAll(async () => {
  if (typeof start === 'string') return;
  dir = await mkdtemp(join(tmpdir(), 'hil-startup-'));
  pair = await createPair({ dir: join(dir, 'pair'), pairId: 'cell-a' });
  other = await createPair({ dir: join(dir, 'other'), pairId: 'cell-a' });
  const issuer = await loadIssuer(pair.dir);
  const put = async (name: string, text: string | Promise<string>) => {
    bad[name] = join(dir, name);
    await writeFile(bad[name], await text);
  };
  await put('two-cas.crt', (await readFile(pair.ca, 'utf8')) + (await readFile(other.ca, 'utf8')));
  await put('intermediate.crt', certPem((await makeIntermediate(issuer, 'not self-signed')).cert));
  await put('corrupt.crl', '-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n');
  await put('foreign.crl', crlPem(await makeCrl({ issuer, number: 2n, signingKey: (await newKey()).privateKey })));
  await put('critical.crl', crlPem(await makeCrl({ issuer, number: 2n, unsupportedCritical: true })));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The service started with these flags (detached: its own process group), its stderr gathered. */
function spawnService(socketDir: string, args: string[]) {
  if (typeof start === 'string') throw new Error(start);
  const how = start.spawn(socketDir, args);
  const child = spawn(how.file, how.args, { cwd: how.cwd, env: how.env, stdio: ['pipe', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return {
    child,
    stderr: () => stderr,
    /** Kill it with its group (the helpers a service started go too). */
    kill: () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    },
  };
}

/**
 * Run the service with these flags until it exits: its exit status and stderr; a code of null when it was
 * still running 30 s later (it started although a check should have failed: stopped, with its group).
 */
function runToExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const s = spawnService(join(dir, 'sock'), args);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      s.kill();
      resolve({ code: null, stderr: s.stderr() });
    }, 30_000);
    s.child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    s.child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr: s.stderr() });
    });
    s.child.stdin.end();
  });
}

type Flags = Record<string, string | undefined>;
const full = (): Flags => ({
  '--remote-listen': '127.0.0.1:0',
  '--remote-ca': pair.ca,
  '--remote-cert': pair.cert,
  '--remote-key': pair.key,
  '--remote-crl': pair.crl,
  '--pair-id': 'cell-a',
});
const argv = (f: Flags) => Object.entries(f).flatMap(([k, v]) => (v === undefined ? [] : [k, v]));

// [what, flags changed from a complete set, what the one stderr line must say (docs/profile.md)], and
// whether exit status 2 for it is docs/profile.md's (OURS). Part 5 item 6 names the checks of the four
// files being there and of --remote-ca holding exactly one self-signed CA; that the server certificate is
// the CA's, that the key matches it and that the CRL is sound at start (item 4 has the CRL judged at each
// handshake) are our start-up checks, as are the forms of --remote-listen and the jog flags.
const OURS = true;
const CASES: Array<[string, () => Flags, RegExp, boolean?]> = [
  ['--remote-ca missing', () => ({ ...full(), '--remote-ca': undefined }), /--remote-listen needs --remote-ca/],
  ['--remote-cert missing', () => ({ ...full(), '--remote-cert': undefined }), /--remote-listen needs --remote-cert/],
  ['--remote-key missing', () => ({ ...full(), '--remote-key': undefined }), /--remote-listen needs --remote-key/],
  ['--remote-crl missing', () => ({ ...full(), '--remote-crl': undefined }), /--remote-listen needs --remote-crl/],
  ['--pair-id missing', () => ({ ...full(), '--pair-id': undefined }), /--remote-listen needs --pair-id/],
  ['credential flags without --remote-listen', () => ({ ...full(), '--remote-listen': undefined }), /--remote-ca needs --remote-listen/, OURS],
  ['--remote-listen not host:port', () => ({ ...full(), '--remote-listen': '127.0.0.1:99999' }), /--remote-listen .*expected host:port/, OURS],
  ['CA file does not exist', () => ({ ...full(), '--remote-ca': join(dir, 'absent.crt') }), /--remote-ca .*cannot read \(ENOENT\)/],
  ['CRL file does not exist', () => ({ ...full(), '--remote-crl': join(dir, 'absent.crl') }), /--remote-crl .*cannot read \(ENOENT\)/],
  ['CA file holds two certificates', () => ({ ...full(), '--remote-ca': bad['two-cas.crt'] }), /exactly one CA certificate, found 2/],
  ['CA certificate not self-signed', () => ({ ...full(), '--remote-ca': bad['intermediate.crt'] }), /not self-signed/],
  ['CA file holds a leaf certificate', () => ({ ...full(), '--remote-ca': pair.cert }), /not a CA certificate/],
  ['key does not match the certificate', () => ({ ...full(), '--remote-key': other.key }), /--remote-key .*does not match/, OURS],
  ['server certificate of another CA', () => ({ ...full(), '--remote-cert': other.cert, '--remote-key': other.key }), /--remote-cert .*not issued by the --remote-ca/, OURS],
  ['key file is not a key', () => ({ ...full(), '--remote-key': pair.crl }), /--remote-key .*not a private key/, OURS],
  ['corrupt CRL', () => ({ ...full(), '--remote-crl': bad['corrupt.crl'] }), /--remote-crl .*not a CRL/, OURS],
  ['CRL file holds no CRL', () => ({ ...full(), '--remote-crl': pair.ca }), /--remote-crl .*exactly one CRL/, OURS],
  ['CRL signed by another key', () => ({ ...full(), '--remote-crl': bad['foreign.crl'] }), /--remote-crl .*not signed by the --remote-ca/, OURS],
  ['CRL with an unsupported critical extension', () => ({ ...full(), '--remote-crl': bad['critical.crl'] }), /--remote-crl .*unsupported critical extension/, OURS],
  ['CRL of another CA', () => ({ ...full(), '--remote-crl': other.crl }), /--remote-crl .*not signed by the --remote-ca/, OURS],
  // The remote jog clock flags (part 5 item 6): decimal uint64, only with the listener.
  ['a remote jog flag without --remote-listen', () => ({ '--remote-jog-drift-ppb': '1' }), /--remote-jog-drift-ppb needs --remote-listen/, OURS],
  ['a remote jog flag that is not a number', () => ({ ...full(), '--remote-jog-max-uncertainty-ns': '1e6' }), /--remote-jog-max-uncertainty-ns must be a decimal uint64/, OURS],
  ['a remote jog flag above uint64', () => ({ ...full(), '--remote-jog-calibration-max-age-ns': '18446744073709551616' }), /--remote-jog-calibration-max-age-ns must be a decimal uint64/, OURS],
];

describe('remote start-up checks', () => {
  test.for(CASES)('%s: exit status 2 with one line', covers('rule:auth.startup_flags', 'limit:remote_startup_failure_exit_status', 'profile:remote.startup_lines'), async ([, flags, message, ours], { skip }) => {
    skip(typeof start === 'string', start as string);
    const r = await runToExit(argv(flags()));
    const status = () => expect(r.code, r.code === null ? `still running 30 s after it was started (stderr: ${r.stderr.slice(0, 300)})` : `stderr: ${r.stderr.slice(0, 300)}`).toBe(2);
    if (ours) await inProfile('profile:remote.startup_lines', status);
    else status();
    await inProfile('profile:remote.startup_lines', () => {
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(message);
    });
  });
});

describe('remote listen address', () => {
  test('--remote-listen without a port listens on the default port 8443', covers('limit:remote_default_port'), async ({ skip }) => {
    skip(typeof start === 'string', start as string);
    // Judged from outside, on any service: a client of the pair is answered at 127.0.0.1:8443 once the service
    // runs. A port already taken there would answer instead of the service (or keep it from listening).
    const creds = await issueClient({ dir: pair.dir, principal: 'viewer-1' });
    const ca = await readFile(pair.ca, 'utf8');
    const at = { port: DEFAULT_PORT, ca, cert: await readFile(creds.cert, 'utf8'), key: await readFile(creds.key, 'utf8') };
    if (await listening(DEFAULT_PORT)) throw new HarnessError('HIL_ERR_TARGET_START', `127.0.0.1:${DEFAULT_PORT} already accepts connections on this host before the service starts: the default-port test cannot tell the service's listener from that one`);
    const s = spawnService(join(dir, 'sock-default-port'), argv({ ...full(), '--remote-listen': '127.0.0.1' }));
    let exited: number | null | undefined;
    s.child.on('exit', (code) => (exited = code));
    try {
      let status: number | null = null;
      let last = '';
      // No start-up time is documented; 30 s is this test's own patience, not a rule.
      for (const end = Date.now() + 30_000; status !== 200 && exited === undefined && Date.now() < end; ) {
        const r = await probe(at).catch((e: Error) => ({ status: null, error: e.message }));
        status = r.status;
        last = r.error;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(exited, `the service exited (status ${exited}) instead of listening on 127.0.0.1:${DEFAULT_PORT}; stderr: ${s.stderr().slice(0, 300)}`).toBeUndefined();
      expect(status, `GET /v1/describe at 127.0.0.1:${DEFAULT_PORT} with a client of the pair, 30 s after the start (last: ${last || 'no HTTP reply'}); stderr: ${s.stderr().slice(0, 300)}`).toBe(200);
    } finally {
      s.kill();
    }
  });
});

/** Whether something on this host accepts TCP connections at 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect({ host: '127.0.0.1', port });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}
