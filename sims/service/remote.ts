// The remote listener (document 1 part 5 "Authentication", part 8 "Remote HTTP timeouts"): HTTPS with
// mutual TLS 1.3 in front of the same request dispatch as the Unix socket.
//
// A connection goes through, in order (docs/profile.md "Remote listener"):
//   1. before the handshake: reload the credential files if a modification time changed (a failed reload
//      refuses every new handshake until the files load again; never the old credentials), refuse when
//      the last reload failed, refuse when the CRL is outside its validity window ("remote CRL not current");
//   2. the TLS 1.3 handshake against the configured CA and CRL (OpenSSL: revoked serial, CRL signature,
//      CRL validity, unhandled critical CRL extension, path length);
//   3. after the handshake, before any HTTP byte is read: the verification result, a client certificate
//      issued directly by the CA, exactly one svc-principal and one svc-pair URI, the pair equal to
//      --pair-id. Any failure destroys the socket: the client gets an alert or a closed connection and
//      never an HTTP byte.
// Only then is the socket handed to the HTTP server, which knows the principal of every request on it.

import { constants as cryptoConstants, createPrivateKey, verify as verifySignature, X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createSecureContext, type SecureContextOptions, type TLSSocket } from 'node:tls';
import { certificateUris, parseCrl, type Crl } from './der.ts';
import { RESPONSE_SCHEMA } from './envelope.ts';
import { ReplyWatch } from './reply-watch.ts';
import { NODE_KEEP_ALIVE_BUFFER_MS } from '../primitives.ts';

/** Remote HTTP timeouts, document 1 part 8: 2 s headers on LAN defaults (10 s otherwise), 30 s request, 65 s reply, 90 s idle. */
export const REMOTE_TIMEOUTS_MS = {
  headersLan: 2_000,
  headersOther: 10_000,
  request: 30_000,
  reply: 65_000,
  idle: 90_000,
} as const;
/** Node closes an idle connection NODE_KEEP_ALIVE_BUFFER_MS after this: at the documented 90 s (it announces `Keep-Alive: timeout=89`). */
const KEEP_ALIVE_MS = REMOTE_TIMEOUTS_MS.idle - NODE_KEEP_ALIVE_BUFFER_MS;
/** How often Node's HTTP server looks for connections past the header and request timeouts (its default is 30 s). */
const TIMEOUT_CHECK_INTERVAL_MS = 250;

/** svc-principal / svc-pair tokens (document 1 part 5 item 3). */
const TOKEN_RE = /^[A-Za-z0-9_.:-]+$/;
/** CRL extensions we understand: CRL number, authority key identifier; entry: reason code, invalidity date. */
const SUPPORTED_CRL_EXTENSIONS = new Set(['2.5.29.20', '2.5.29.35']);
const SUPPORTED_CRL_ENTRY_EXTENSIONS = new Set(['2.5.29.21', '2.5.29.24']);

export class RemoteStartupError extends Error {}

/** Session owners (document 1 part 5 items 1 and 3): the local transport, or a remote principal. */
export const LOCAL_OWNER = 'local';
export const ownerOfPrincipal = (principal: string): string => `principal:${principal}`;

export interface RemoteFiles {
  ca: string;
  cert: string;
  key: string;
  crl: string;
}

export interface RemoteOptions {
  host: string;
  port: number;
  files: RemoteFiles;
  pairId: string;
  linkProfile: string;
  /** One line of the service log (stderr). */
  log(line: string): void;
  /** The service's request dispatch, with the principal the certificate named. */
  handle(req: IncomingMessage, res: ServerResponse, principal: string): void;
  /** An HTTP upgrade request (the remote jog WebSocket), with the principal the certificate named. */
  upgrade?(req: IncomingMessage, socket: Duplex, head: Buffer, principal: string): void;
}

/** Parse `host:port` of --remote-listen (document 1 part 1: defaults 127.0.0.1 and 8443). */
export function parseListen(v: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]*)):?([0-9]*)$/.exec(v);
  const host = (m?.[1] ?? m?.[2]) || '127.0.0.1';
  const portText = m?.[3] || '8443';
  const port = Number(portText);
  if (!m || !/^[0-9]{1,5}$/.test(portText) || port > 65535) throw new RemoteStartupError(`--remote-listen ${JSON.stringify(v)}: expected host:port`);
  return { host, port };
}

interface Credentials {
  ca: X509Certificate;
  tls: SecureContextOptions;
  crlThisUpdate: Date;
  crlNextUpdate: Date | undefined;
}

/**
 * Load and check the four credential files (document 1 part 5 item 6). Synchronous on purpose: a reload
 * happens between accepting a TCP connection and starting its handshake. Throws RemoteStartupError.
 */
export function loadCredentials(files: RemoteFiles): Credentials {
  const read = (flag: string, path: string): string => {
    try {
      return readFileSync(path, 'utf8');
    } catch (e) {
      throw new RemoteStartupError(`${flag} ${path}: cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  };
  const caText = read('--remote-ca', files.ca);
  const certText = read('--remote-cert', files.cert);
  const keyText = read('--remote-key', files.key);
  const crlText = read('--remote-crl', files.crl);

  const caBlocks = pemBlocks(caText, 'CERTIFICATE');
  if (caBlocks.length !== 1) throw new RemoteStartupError(`--remote-ca ${files.ca}: must hold exactly one CA certificate, found ${caBlocks.length}`);
  const ca = parseCert('--remote-ca', files.ca, caBlocks[0]!);
  if (!ca.ca) throw new RemoteStartupError(`--remote-ca ${files.ca}: not a CA certificate (basic constraints)`);
  if (!ca.checkIssued(ca) || !ca.verify(ca.publicKey)) throw new RemoteStartupError(`--remote-ca ${files.ca}: the CA certificate is not self-signed`);

  const certBlocks = pemBlocks(certText, 'CERTIFICATE');
  if (certBlocks.length === 0) throw new RemoteStartupError(`--remote-cert ${files.cert}: no certificate`);
  const cert = parseCert('--remote-cert', files.cert, certBlocks[0]!);
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) throw new RemoteStartupError(`--remote-cert ${files.cert}: not issued by the --remote-ca certificate`);
  let key;
  try {
    key = createPrivateKey(keyText);
  } catch (e) {
    throw new RemoteStartupError(`--remote-key ${files.key}: not a private key (${(e as Error).message})`);
  }
  if (!cert.checkPrivateKey(key)) throw new RemoteStartupError(`--remote-key ${files.key}: does not match the --remote-cert certificate`);

  const crlBlocks = pemBlocks(crlText, 'X509 CRL');
  if (crlBlocks.length !== 1) throw new RemoteStartupError(`--remote-crl ${files.crl}: must hold exactly one CRL (PEM "X509 CRL"), found ${crlBlocks.length}`);
  const crl = checkCrl(files.crl, crlBlocks[0]!, ca);

  const tls: SecureContextOptions = {
    ca: caText,
    cert: certText,
    key: keyText,
    crl: crlText,
    minVersion: 'TLSv1.3',
    maxVersion: 'TLSv1.3',
    // Document 1 part 5 item 5: no session tickets (every handshake is a full one).
    secureOptions: cryptoConstants.SSL_OP_NO_TICKET,
  };
  try {
    createSecureContext(tls);
  } catch (e) {
    throw new RemoteStartupError(`remote credentials refused by TLS: ${(e as Error).message}`);
  }
  return { ca, tls, crlThisUpdate: crl.thisUpdate, crlNextUpdate: crl.nextUpdate };
}

function parseCert(flag: string, path: string, der: Buffer): X509Certificate {
  try {
    return new X509Certificate(der);
  } catch (e) {
    throw new RemoteStartupError(`${flag} ${path}: not a certificate (${(e as Error).message})`);
  }
}

function pemBlocks(text: string, label: string): Buffer[] {
  const out: Buffer[] = [];
  const re = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;
  for (let m = re.exec(text); m; m = re.exec(text)) if (m[1] === label) out.push(Buffer.from(m[2]!.replace(/\s+/g, ''), 'base64'));
  return out;
}

/** The CRL must be issued and signed by the CA and carry no critical extension we do not understand. */
function checkCrl(path: string, der: Buffer, ca: X509Certificate): Crl {
  let crl: Crl;
  try {
    crl = parseCrl(der);
  } catch (e) {
    throw new RemoteStartupError(`--remote-crl ${path}: not a CRL (${(e as Error).message})`);
  }
  const hashes: Record<string, string> = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
  const hash = crl.hash === undefined ? undefined : hashes[crl.hash];
  const signed = hash !== undefined && safeVerify(hash, crl.tbs, ca, crl.signature);
  if (!signed) throw new RemoteStartupError(`--remote-crl ${path}: not signed by the --remote-ca certificate`);
  for (const e of crl.extensions) {
    if (e.critical && !SUPPORTED_CRL_EXTENSIONS.has(e.type)) throw new RemoteStartupError(`--remote-crl ${path}: unsupported critical extension ${e.type}`);
  }
  for (const entry of crl.entries) {
    for (const e of entry.extensions) {
      if (e.critical && !SUPPORTED_CRL_ENTRY_EXTENSIONS.has(e.type)) throw new RemoteStartupError(`--remote-crl ${path}: unsupported critical entry extension ${e.type}`);
    }
  }
  return crl;
}

function safeVerify(hash: string, data: Buffer, ca: X509Certificate, signature: Buffer): boolean {
  try {
    return verifySignature(hash, data, ca.publicKey, signature);
  } catch {
    return false;
  }
}

/** Identity of a client certificate (document 1 part 5 item 3), or why it has none. */
export function identityOf(raw: Buffer, pairId: string): { principal: string } | { refused: string } {
  let uris: string[];
  try {
    uris = certificateUris(raw);
  } catch (e) {
    return { refused: `client certificate unreadable: ${(e as Error).message}` };
  }
  const principals = uris.filter((u) => u.startsWith('svc-principal:')).map((u) => u.slice('svc-principal:'.length));
  const pairs = uris.filter((u) => u.startsWith('svc-pair:')).map((u) => u.slice('svc-pair:'.length));
  if (principals.length !== 1) return { refused: `client certificate carries ${principals.length} svc-principal URIs (exactly one required)` };
  if (pairs.length !== 1) return { refused: `client certificate carries ${pairs.length} svc-pair URIs (exactly one required)` };
  const [principal] = principals as [string];
  const [pair] = pairs as [string];
  if (!TOKEN_RE.test(principal)) return { refused: 'svc-principal is not a token of [A-Za-z0-9_.:-]+' };
  if (!TOKEN_RE.test(pair)) return { refused: 'svc-pair is not a token of [A-Za-z0-9_.:-]+' };
  if (pair !== pairId) return { refused: `svc-pair ${pair} differs from --pair-id ${pairId}` };
  return { principal };
}

export class RemoteListener {
  private tls?: HttpsServer;
  private http?: HttpsServer;
  private httpConnection?: (s: TLSSocket) => void;
  private creds: Credentials;
  private stamps: string;
  /** Why the last reload failed; while set, every new handshake is refused (no fallback). */
  private broken: string | null = null;
  private readonly principals = new WeakMap<Socket, string>();
  private readonly sockets = new Set<Socket>();
  /** The TCP socket under each TLS connection, by its peer address (for the reply watch). */
  private readonly raws = new Map<string, Socket>();
  private readonly replies = new ReplyWatch(REMOTE_TIMEOUTS_MS.reply, TIMEOUT_CHECK_INTERVAL_MS, (s, ms) =>
    this.o.log(`remote: closed ${peer(s)}: its reply made no progress for ${Math.round(ms / 1000)} s`),
  );
  address?: { host: string; port: number };

  /** Load the credentials now: a failure is a startup error (exit status 2). */
  constructor(private readonly o: RemoteOptions) {
    this.stamps = this.stampFiles();
    this.creds = loadCredentials(o.files);
  }

  /** Modification times (ns) and inodes of the four files; a change triggers a reload. */
  private stampFiles(): string {
    return Object.values(this.o.files)
      .map((p) => {
        try {
          const s = statSync(p, { bigint: true });
          return `${s.mtimeNs}:${s.ino}:${s.size}`;
        } catch {
          return 'missing';
        }
      })
      .join('|');
  }

  private reloadIfChanged(): void {
    const stamps = this.stampFiles();
    if (stamps === this.stamps) return;
    this.stamps = stamps;
    try {
      const creds = loadCredentials(this.o.files);
      this.tls!.setSecureContext(creds.tls);
      this.creds = creds;
      if (this.broken) this.o.log('remote: credentials reloaded; handshakes accepted again');
      else this.o.log('remote: credentials reloaded');
      this.broken = null;
    } catch (e) {
      this.broken = (e as Error).message;
      this.o.log(`remote: credentials reload failed: ${this.broken}; new handshakes are refused until the files load`);
    }
  }

  async start(): Promise<{ host: string; port: number }> {
    const headers = this.o.linkProfile === 'lan' ? REMOTE_TIMEOUTS_MS.headersLan : REMOTE_TIMEOUTS_MS.headersOther;
    // Every remote HTTP timeout is set here explicitly (document 1 part 8), never left at Node's default:
    // headersTimeout reads the headers, requestTimeout the whole request, keepAliveTimeout the idle bound
    // between requests. The reply write bound is the listener's own ReplyWatch (sims/service/reply-watch.ts
    // says why Node's `timeout` cannot be it), so `timeout` is 0.
    // One HTTPS server: its own listen() starts Node's timeout bookkeeping (the header and request checks
    // run only for servers that listen). Its HTTP connection listener is taken off 'secureConnection' and
    // called by afterHandshake once the peer is verified, so a refused socket never meets the HTTP parser.
    const server = createHttpsServer(
      {
        ...this.creds.tls,
        requestCert: true,
        // Verification failures are read from socket.authorizationError after the handshake, so that the
        // service can log why; the socket is destroyed before any HTTP byte (docs/profile.md).
        rejectUnauthorized: false,
        handshakeTimeout: headers,
        headersTimeout: headers,
        requestTimeout: REMOTE_TIMEOUTS_MS.request,
        keepAliveTimeout: KEEP_ALIVE_MS,
        connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
      },
      (req, res) => {
        const principal = this.principals.get(req.socket);
        if (principal === undefined) {
          req.socket.destroy(); // cannot happen: only verified sockets reach the HTTP server
          return;
        }
        const browser = fromBrowserPage(req);
        if (browser !== undefined) {
          // JSON Response envelope as every refusal of the service (document 1 part 2), then the connection closes.
          const body = Buffer.from(`${JSON.stringify({ schema: RESPONSE_SCHEMA, operation: 'unknown', error: `cross_site_request: ${browser}` })}\n`);
          req.resume();
          res.writeHead(403, { 'content-type': 'application/json', 'content-length': body.length, connection: 'close' });
          res.end(body);
          return;
        }
        this.o.handle(req, res, principal);
      },
    );
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const principal = this.principals.get(req.socket);
      if (principal === undefined || !this.o.upgrade) {
        socket.destroy();
        return;
      }
      const browser = fromBrowserPage(req);
      if (browser !== undefined) {
        // A pre-upgrade failure as the documented ones (part 5 "Remote jog WebSocket"): text/plain, label first.
        const text = `cross_site_request: ${browser}\n`;
        socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`);
        return;
      }
      this.o.upgrade(req, socket, head, principal);
    });
    server.timeout = 0;
    server.prependListener('request', (req: IncomingMessage, res) => {
      const s = req.socket as TLSSocket;
      this.replies.watch(s, this.raws.get(connKey(s)), res);
    });
    server.keepAliveTimeout = KEEP_ALIVE_MS;
    server.headersTimeout = headers;
    server.requestTimeout = REMOTE_TIMEOUTS_MS.request;
    const httpListeners = server.listeners('secureConnection') as Array<(s: TLSSocket) => void>;
    if (httpListeners.length !== 1) throw new Error(`expected one HTTP connection listener on the HTTPS server, found ${httpListeners.length}`);
    this.httpConnection = httpListeners[0]!.bind(server);
    server.removeAllListeners('secureConnection');
    this.http = server;
    const tls = server;
    this.tls = tls;
    tls.prependListener('connection', (raw: Socket) => this.beforeHandshake(raw));
    tls.on('secureConnection', (s: TLSSocket) => this.afterHandshake(s));
    tls.on('tlsClientError', (e: Error & { code?: string }, s: TLSSocket) => {
      const reason = (e as Error & { reason?: string }).reason;
      this.o.log(`remote: refused handshake from ${peer(s)}: ${e.code ?? 'tls_error'}${reason ? ` (${reason})` : ''}`);
      s.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      tls.once('error', reject);
      tls.listen(this.o.port, this.o.host, () => {
        tls.off('error', reject);
        resolve();
      });
    });
    const a = tls.address() as { address: string; port: number };
    this.address = { host: a.address, port: a.port };
    this.o.log(`remote: listening on ${a.address}:${a.port} (TLS 1.3, client certificates of pair ${this.o.pairId})`);
    return this.address;
  }

  private refuse(s: Socket, why: string): void {
    this.o.log(`remote: refused handshake from ${peer(s)}: ${why}`);
    s.destroy();
  }

  private beforeHandshake(raw: Socket): void {
    this.sockets.add(raw);
    const key = connKey(raw);
    this.raws.set(key, raw);
    raw.once('close', () => {
      this.sockets.delete(raw);
      if (this.raws.get(key) === raw) this.raws.delete(key);
    });
    raw.on('error', () => undefined);
    this.reloadIfChanged();
    if (this.broken) return this.refuse(raw, `credentials not loaded (${this.broken})`);
    const now = Date.now();
    const c = this.creds;
    if (now < c.crlThisUpdate.getTime() || (c.crlNextUpdate && now > c.crlNextUpdate.getTime())) {
      // Document 1 part 5 item 8: the error text of an expired CRL.
      return this.refuse(raw, `remote CRL not current (this update ${c.crlThisUpdate.toISOString()}, next update ${c.crlNextUpdate?.toISOString() ?? 'none'})`);
    }
  }

  private afterHandshake(s: TLSSocket): void {
    if (s.destroyed) return;
    const cert = s.getPeerX509Certificate();
    if (!cert) return this.refuse(s, 'no client certificate');
    // Document 1 part 5 item 2: issued directly by the CA (an intermediate, or another CA, is named as such
    // before OpenSSL's verdict, which would only say that the intermediate has no CRL).
    const ca = this.creds.ca;
    if (cert.ca || !cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return this.refuse(s, 'client certificate not issued directly by the CA');
    if (!s.authorized) {
      const code = String(s.authorizationError ?? 'unauthorized');
      const text = code === 'CRL_HAS_EXPIRED' || code === 'CRL_NOT_YET_VALID' ? `remote CRL not current (${code})` : code;
      return this.refuse(s, text);
    }
    const id = identityOf(cert.raw, this.o.pairId);
    if ('refused' in id) return this.refuse(s, id.refused);
    this.principals.set(s, id.principal);
    this.httpConnection!(s);
  }

  /**
   * Stop. With `graceMs`, keep serving that long first: the service is shutting down, so an upgrade then
   * answers 503 independent_jog_unavailable (docs/profile.md "Remote jog").
   */
  async stop(graceMs = 0): Promise<void> {
    const tls = this.tls;
    if (!tls) return;
    if (graceMs > 0) await new Promise((r) => setTimeout(r, graceMs));
    this.replies.stop();
    tls.closeAllConnections();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => tls.close(() => r()));
  }
}

function connKey(s: Socket): string {
  return `${s.remoteAddress}|${s.remotePort}`;
}

function peer(s: Socket): string {
  return `${s.remoteAddress ?? '?'}:${s.remotePort ?? '?'}`;
}

/**
 * The remote listener serves no web page, so no page is its own: a request a browser sends on a page's
 * behalf is refused before it is routed (docs/profile.md "Remote listener", browser requests). A browser
 * that holds a client certificate of the pair would otherwise let any page it opens send commands, and
 * open the jog WebSocket (browsers do not apply CORS to WebSocket upgrades), with that certificate's
 * principal. Browsers send `Origin` on every cross-origin request that can change state and on every
 * WebSocket upgrade, and `Sec-Fetch-Site` on every request; the harness, curl, ws and undici send neither
 * unless told to.
 */
export function fromBrowserPage(req: IncomingMessage): string | undefined {
  const origin = req.headers.origin;
  if (origin !== undefined) return `Origin ${JSON.stringify(origin)}: the remote listener answers no web page`;
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'none') return `Sec-Fetch-Site ${JSON.stringify(site)}: the remote listener answers no web page`;
  return undefined;
}
