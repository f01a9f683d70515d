// The clean-room service's remote listener (document 1 part 5 "Authentication", part 8 "Remote HTTP
// timeouts"), written from document 1 alone: HTTPS with mutual TLS 1.3 in front of the same dispatch as the
// Unix socket (harness/cleanroom/service.ts), each request carrying the principal of the client
// certificate that opened its connection.
//
// Every connection passes two gates before the HTTP parser sees a byte of it:
//   1. on the TCP connection, before the handshake: the four credential files are loaded again when one of
//      them changed (modification time, or the file replaced by another: part 5 item 5); a failed load
//      leaves no credentials at all, so every connection is closed until the files load, never served with
//      the previous ones; a CRL outside its validity window closes it too (item 4, item 8: the log says
//      `remote CRL not current`). Closed before any TLS byte.
//   2. after the handshake (TLS 1.3 only, a client certificate requested): the certificate is judged
//      against the CA and the CRL loaded now (harness/cleanroom/credentials.ts judgeClient); a refused one
//      is closed without a byte more.
// A refused handshake is one log line; so is every reload. Open connections are never revoked (item 5).
//
// TLS session tickets are disabled (item 5): SSL_OP_NO_TICKET, and no NewSessionTicket is sent at all,
// which Node's API cannot ask of OpenSSL: the process must run with harness/cleanroom/no-tickets.cnf as its
// OpenSSL configuration (NumTickets = 0). ticketsDisabled() checks that with a handshake of its own before
// the listener starts; `hil cleanroom serve` restarts itself with the configuration when it is missing.

import { constants } from 'node:crypto';
import { statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { watchConnections } from './connections.ts';
import { crlNotCurrent, judgeClient, loadCredentials, type CredentialFiles, type Credentials } from './credentials.ts';

/** The OpenSSL configuration the service's process runs with when it has a remote listener. */
export const NO_TICKETS_CNF = fileURLToPath(new URL('./no-tickets.cnf', import.meta.url));

/** Part 8 "Remote HTTP timeouts", and how often they are looked at. */
export interface RemoteBounds {
  /** Headers (and the TLS handshake before them): 2 s on LAN defaults, 10 s otherwise. */
  headersMs: number;
  requestMs: number;
  replyMs: number;
  idleMs: number;
  checkMs: number;
}

export function remoteBounds(linkProfile: 'lan' | 'internet'): RemoteBounds {
  return { headersMs: linkProfile === 'lan' ? 2_000 : 10_000, requestMs: 30_000, replyMs: 65_000, idleMs: 90_000, checkMs: 250 };
}

export interface RemoteListenerOptions {
  host: string;
  port: number;
  files: CredentialFiles;
  /** `--pair-id`: the pair every client certificate must name (part 5 item 3). */
  pairId: string;
  bounds: RemoteBounds;
  log: (line: string) => void;
  /** Answers one request of an authenticated principal. */
  handler: (req: IncomingMessage, res: ServerResponse, principal: string) => void;
}

/** The credential files' identity: modification time (ns) and inode of each, or their absence. */
function stampOf(f: CredentialFiles): string {
  return [f.ca, f.cert, f.key, f.crl]
    .map((p) => {
      try {
        const s = statSync(p, { bigint: true });
        return `${s.mtimeNs}:${s.ino}`;
      } catch {
        return 'absent';
      }
    })
    .join('|');
}

const peer = (s: Socket): string => `${s.remoteAddress ?? '?'}:${s.remotePort ?? '?'}`;

export class RemoteListener {
  private creds: Credentials | undefined;
  /** Why the last load failed (creds undefined then). */
  private failure = '';
  private stamp: string;
  private readonly server: Server;
  private readonly principals = new WeakMap<object, string>();
  private readonly unwatch: () => void;

  /** Loads the files (a CredentialError at start-up is the caller's exit status 2, part 5 item 6). */
  constructor(private readonly o: RemoteListenerOptions) {
    this.stamp = stampOf(o.files);
    const creds = loadCredentials(o.files);
    this.creds = creds;
    const b = o.bounds;
    this.server = createServer(
      {
        ...this.context(creds),
        requestCert: true,
        // The certificate is judged by gate 2, with the CRL of the moment and the identity rules together.
        rejectUnauthorized: false,
        handshakeTimeout: b.headersMs,
        headersTimeout: b.headersMs,
        requestTimeout: b.requestMs,
        keepAliveTimeout: 0,
        connectionsCheckingInterval: b.checkMs,
      },
      (req, res) => o.handler(req, res, this.principals.get(req.socket) ?? ''),
    );
    this.unwatch = watchConnections(this.server, { idleMs: b.idleMs, replyMs: b.replyMs, checkMs: b.checkMs });
    // Gate 1 in front of node:tls's own connection listener, gate 2 in front of the HTTP parser's.
    const tlsListeners = this.server.listeners('connection') as Array<(s: Socket) => void>;
    this.server.removeAllListeners('connection');
    this.server.on('connection', (socket: Socket) => {
      const why = this.beforeHandshake();
      if (why !== undefined) return this.refuse(socket, why);
      for (const f of tlsListeners) f.call(this.server, socket);
    });
    const httpListeners = this.server.listeners('secureConnection') as Array<(s: TLSSocket) => void>;
    this.server.removeAllListeners('secureConnection');
    this.server.on('secureConnection', (socket: TLSSocket) => {
      const verdict = this.creds ? judgeClient(socket.getPeerX509Certificate(), this.creds, o.pairId, new Date()) : `credentials not loaded (${this.failure})`;
      if (typeof verdict === 'string') return this.refuse(socket, verdict);
      this.principals.set(socket, verdict.principal);
      for (const f of httpListeners) f.call(this.server, socket);
    });
    // Handshakes node:tls refused itself: an older protocol (a protocol version alert), plaintext, a timeout.
    this.server.on('tlsClientError', (e: Error & { code?: string; reason?: string }, socket: TLSSocket) => this.o.log(`cleanroom remote: handshake with ${peer(socket)} refused: TLS ${e.code ?? 'error'} (${e.reason ?? e.message})`));
  }

  private context(c: Credentials) {
    return { ...c.tls, minVersion: 'TLSv1.3' as const, maxVersion: 'TLSv1.3' as const, secureOptions: constants.SSL_OP_NO_TICKET };
  }

  /** Gate 1: reload changed files, then whether a handshake may start now (undefined) or why not. */
  private beforeHandshake(): string | undefined {
    const stamp = stampOf(this.o.files);
    if (stamp !== this.stamp) {
      this.stamp = stamp;
      try {
        const creds = loadCredentials(this.o.files);
        this.server.setSecureContext(this.context(creds));
        this.creds = creds;
        this.o.log('cleanroom remote: credential files changed; loaded again');
      } catch (e) {
        this.creds = undefined;
        this.failure = (e as Error).message;
        this.o.log(`cleanroom remote: credential files changed; load failed: ${this.failure}; new handshakes are refused until they load`);
      }
    }
    if (!this.creds) return `credentials not loaded (${this.failure})`;
    return crlNotCurrent(this.creds.crl, new Date());
  }

  private refuse(socket: Socket, why: string): void {
    this.o.log(`cleanroom remote: handshake with ${peer(socket)} refused: ${why}`);
    socket.destroy();
  }

  async listen(): Promise<{ host: string; port: number }> {
    await new Promise<void>((resolve, reject) => this.server.once('error', reject).listen(this.o.port, this.o.host, () => resolve()));
    const a = this.server.address() as AddressInfo;
    this.o.log(`cleanroom remote: listening on ${a.address}:${a.port} for pair ${this.o.pairId}`);
    return { host: a.address, port: a.port };
  }

  async close(): Promise<void> {
    this.unwatch();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Whether this process's TLS sends no NewSessionTicket: one TLS 1.3 handshake with itself on loopback,
 * served with the listener's own certificate and key. The server writes one byte and closes once the
 * handshake is done; any ticket is sent before that, and the client has reported it (its 'session' event,
 * which node:tls may emit after the byte) by the time the connection has closed.
 */
export async function ticketsDisabled(tls: { cert: string; key: string }): Promise<boolean> {
  const server = createTlsServer({ ...tls, minVersion: 'TLSv1.3', secureOptions: constants.SSL_OP_NO_TICKET }, (s) => s.end('x'));
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  try {
    const port = (server.address() as AddressInfo).port;
    return await new Promise<boolean>((resolve, reject) => {
      let ticket = false;
      const c = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false, minVersion: 'TLSv1.3' });
      c.on('session', () => (ticket = true));
      c.on('data', () => undefined);
      c.once('close', () => resolve(!ticket));
      c.once('error', reject);
    });
  } finally {
    server.close();
  }
}
