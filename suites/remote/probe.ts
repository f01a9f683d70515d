// Probes of the remote listener at the TLS and TCP level, for the handshake refusals of document 1
// part 5: a refused handshake gets an alert or a closed connection and never an HTTP byte.

import { readFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect, type SecureVersion, type TLSSocket } from 'node:tls';
import { expect } from 'vitest';
import { clientFiles } from '../../harness/certs.ts';
import { isReferenceTarget } from '../../harness/trace.ts';
import { startsStacks, type RemoteStack } from '../../harness/targets/remote.ts';

/** The target starts the reference stack (sim, or replay from a recorded run), so tests can start their own. */
export const ownStacks = startsStacks();
export const SKIP = 'needs the sim or replay target: only they can start a stack with a remote listener and its own fresh certificates';

export interface ProbeOptions {
  /** The listener's host (default 127.0.0.1). */
  host?: string;
  port: number;
  ca: string;
  cert?: string;
  key?: string;
  minVersion?: SecureVersion;
  maxVersion?: SecureVersion;
  /** Resume this TLS session (tickets test). */
  session?: Buffer;
}

export interface ProbeResult {
  /** HTTP status of the reply, null when no HTTP reply arrived. */
  status: number | null;
  /** Every application byte the server sent. */
  bytes: Buffer;
  /** Why the connection ended, when it ended in an error. */
  error: string;
  reused: boolean;
}

/** One request that closes its connection, naming the listener as its Host. */
const request = (host: string, port: number): string => `GET /v1/describe HTTP/1.1\r\nHost: ${host.includes(':') ? `[${host}]` : host}:${port}\r\nConnection: close\r\n\r\n`;

/** One TLS connection sending one request; resolves when the server closes it. */
export function probe(o: ProbeOptions): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let error = '';
    let reused = false;
    const host = o.host ?? '127.0.0.1';
    const s: TLSSocket = tlsConnect({
      host,
      port: o.port,
      ca: o.ca,
      cert: o.cert,
      key: o.key,
      minVersion: o.minVersion ?? 'TLSv1.2',
      maxVersion: o.maxVersion ?? 'TLSv1.3',
      session: o.session,
      // The server certificate names the listener's host (127.0.0.1 and localhost by default); check it as any client would.
      rejectUnauthorized: true,
    });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error('probe: the server neither answered nor closed within 15 s'));
    }, 15_000);
    s.on('secureConnect', () => {
      reused = s.isSessionReused();
      s.write(request(host, o.port));
    });
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', (e: Error & { code?: string }) => {
      error ||= e.code ?? e.message;
    });
    s.on('close', () => {
      clearTimeout(timer);
      const bytes = Buffer.concat(chunks);
      const m = /^HTTP\/1\.1 (\d{3}) /.exec(bytes.toString('latin1'));
      resolve({ status: m ? Number(m[1]) : null, bytes, error, reused });
    });
  });
}

/** A plaintext request to the TLS port: every byte the server sends back. */
export function plaintext(host: string, port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const s = netConnect({ host, port }, () => s.write(request(host, port)));
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error('plaintext probe: no close within 15 s'));
    }, 15_000);
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
  });
}

/** The client files of a principal as probe options. */
export function clientOf(stack: RemoteStack, principalFile: string): Pick<ProbeOptions, 'cert' | 'key'> {
  const f = clientFiles(stack.pair.dir, principalFile);
  return { cert: readFileSync(f.cert, 'utf8'), key: readFileSync(f.key, 'utf8') };
}

export function caOf(stack: RemoteStack): string {
  return readFileSync(stack.pair.ca, 'utf8');
}

/** Assert a refused handshake: no HTTP byte at all, and the connection closed. */
export function expectRefused(r: ProbeResult): void {
  expect(r.status, `refused handshake answered HTTP: ${r.bytes.toString('latin1').slice(0, 80)}`).toBeNull();
  expect(r.bytes.length, 'a refused handshake must not carry any application byte').toBe(0);
}

/**
 * Wait until the stack's log (stderr, or the log file the run named) gains a line matching `re` after
 * `from` characters; an assertion failure naming what it has when none came in `timeoutMs`.
 */
export async function logLine(stack: RemoteStack, from: number, re: RegExp, timeoutMs = 3_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const line = stack
      .stderr()
      .slice(from)
      .split('\n')
      .find((l) => re.test(l));
    if (line) return line;
    if (Date.now() > until) {
      expect(stack.stderr().slice(from), `no log line matching ${re}`).toMatch(re);
      return '';
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A log line in docs/profile.md's wording (profile:remote.refusal_log), for a check inside inProfile. On the
 * reference stack, logLine as it is. Someone else's service logs in its own words, and waiting out the whole
 * 3 s for a line that will never come would cost every such check 3 s: once its log has grown since `from`
 * (it logged the event its way), the wording is judged on what arrived within the next 250 ms.
 */
export async function profileLogLine(stack: RemoteStack, from: number, re: RegExp): Promise<string> {
  if (isReferenceTarget()) return logLine(stack, from, re);
  const until = Date.now() + 3_000;
  while (stack.stderr().length <= from && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  return logLine(stack, from, re, 250);
}
