// Certificate tooling for the remote listener (document 1 part 5 item 8): one EC P-256 CA per pair
// (3650 days, path length 0), a server certificate (365 days), one client certificate per principal
// (365 days) carrying exactly one `svc-principal:<id>` and one `svc-pair:<pair>` URI, and a CRL valid
// 7 days. `hil certs` drives the pair-directory functions; the suites also use the lower-level builders
// to make deliberately wrong credentials (expired CRLs, foreign signers, intermediates ...).
//
// Files of a pair directory (docs/profile.md "Certificate tooling"):
//   ca.crt ca.key server.crt server.key crl.pem pair.json clients/<principal>.crt clients/<principal>.key
// Every file is written to a temporary name and renamed, so a service reloading credentials never reads
// half a file; key files are mode 0600.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { randomBytes, webcrypto } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { dirname, join } from 'node:path';

type CryptoKey = webcrypto.CryptoKey;
const subtle = webcrypto.subtle;
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

/** Validity periods of document 1 part 5 item 8, in days. */
export const VALIDITY_DAYS = { ca: 3650, server: 365, client: 365, crl: 7 } as const;
/** Tokens of svc-principal and svc-pair (document 1 part 5 item 3). */
export const TOKEN_RE = /^[A-Za-z0-9_.:-]+$/;
const OID_CRL_NUMBER = '2.5.29.20';

export class CertError extends Error {
  constructor(
    readonly code: 'certs_usage' | 'certs_state' | 'certs_unknown_serial',
    message: string,
  ) {
    super(message);
  }
}

export interface KeyPair {
  publicKey: CryptoKey;
  privateKey: CryptoKey;
}

export interface Issuer {
  cert: x509.X509Certificate;
  key: CryptoKey;
}

export async function newKey(): Promise<KeyPair> {
  return (await subtle.generateKey(EC, true, ['sign', 'verify'])) as KeyPair;
}

/** A positive 128-bit serial, 32 lowercase hex digits (the first byte is 0x01..0x7f). */
export function newSerial(): string {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) || 0x01;
  return b.toString('hex');
}

export async function keyPem(k: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await subtle.exportKey('pkcs8', k), 'PRIVATE KEY') + '\n';
}

export function certPem(c: x509.X509Certificate): string {
  return c.toString('pem') + '\n';
}

/** OpenSSL refuses the library's default label; `X509 CRL` is the standard one. */
export function crlPem(c: x509.X509Crl): string {
  return x509.PemConverter.encode(c.rawData, 'X509 CRL') + '\n';
}

export async function importKey(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decode(pem)[0];
  if (!der) throw new CertError('certs_state', 'no PEM block in key file');
  return subtle.importKey('pkcs8', der, EC, true, ['sign']);
}

async function publicOf(k: KeyPair | CryptoKey): Promise<CryptoKey> {
  return 'publicKey' in k ? k.publicKey : k;
}

export interface CaOptions {
  name: string;
  key?: KeyPair;
  notBefore?: Date;
  days?: number;
  /** Default 0 (document 1 part 5 item 2: no intermediates). */
  pathLength?: number;
  serial?: string;
}

/** A self-signed EC P-256 CA. */
export async function makeCa(o: CaOptions): Promise<Issuer & { keys: KeyPair }> {
  const keys = o.key ?? (await newKey());
  const notBefore = o.notBefore ?? new Date(Date.now() - 60_000);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: o.serial ?? newSerial(),
    name: `CN=${o.name}`,
    notBefore,
    notAfter: new Date(notBefore.getTime() + (o.days ?? VALIDITY_DAYS.ca) * DAY_MS),
    signingAlgorithm: SIGN,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, o.pathLength ?? 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, key: keys.privateKey, keys };
}

/** An intermediate CA issued by `issuer` (only to prove the listener refuses it). */
export async function makeIntermediate(issuer: Issuer, name: string): Promise<Issuer> {
  const keys = await newKey();
  const notBefore = new Date(Date.now() - 60_000);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: newSerial(),
    subject: `CN=${name}`,
    issuer: issuer.cert.subject,
    notBefore,
    notAfter: new Date(notBefore.getTime() + VALIDITY_DAYS.server * DAY_MS),
    signingAlgorithm: SIGN,
    publicKey: keys.publicKey,
    signingKey: issuer.key,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(issuer.cert.publicKey),
    ],
  });
  return { cert, key: keys.privateKey };
}

export interface LeafOptions {
  issuer: Issuer;
  kind: 'server' | 'client';
  commonName: string;
  /** Subject alternative names: URIs (clients) or DNS names / IP addresses (server). */
  uris?: string[];
  hosts?: string[];
  key?: KeyPair;
  serial?: string;
  notBefore?: Date;
  days?: number;
}

export async function makeLeaf(o: LeafOptions): Promise<{ cert: x509.X509Certificate; keys: KeyPair; serial: string }> {
  const keys = o.key ?? (await newKey());
  const serial = o.serial ?? newSerial();
  const notBefore = o.notBefore ?? new Date(Date.now() - 60_000);
  const names: x509.JsonGeneralName[] = [
    ...(o.uris ?? []).map((value) => ({ type: 'url' as const, value })),
    ...(o.hosts ?? []).map((value) => (isIP(value) ? { type: 'ip' as const, value } : { type: 'dns' as const, value })),
  ];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial,
    subject: `CN=${o.commonName}`,
    issuer: o.issuer.cert.subject,
    notBefore,
    notAfter: new Date(notBefore.getTime() + (o.days ?? (o.kind === 'server' ? VALIDITY_DAYS.server : VALIDITY_DAYS.client)) * DAY_MS),
    signingAlgorithm: SIGN,
    publicKey: keys.publicKey,
    signingKey: o.issuer.key,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([o.kind === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth], false),
      new x509.SubjectAlternativeNameExtension(names, false),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(o.issuer.cert.publicKey),
    ],
  });
  return { cert, keys, serial };
}

export interface CrlOptions {
  issuer: Issuer;
  revoked?: Array<{ serial: string; date: Date }>;
  number: bigint;
  thisUpdate?: Date;
  /** Default thisUpdate + 7 days. */
  nextUpdate?: Date;
  /** Sign with this key instead of the issuer's (a CRL "not signed by the CA"). */
  signingKey?: CryptoKey;
  /** Add a critical extension no verifier supports (OID 1.3.6.1.4.1.55555.1.1). */
  unsupportedCritical?: boolean;
}

export async function makeCrl(o: CrlOptions): Promise<x509.X509Crl> {
  const thisUpdate = o.thisUpdate ?? new Date(Date.now() - 60_000);
  const extensions: x509.Extension[] = [
    await x509.AuthorityKeyIdentifierExtension.create(o.issuer.cert.publicKey),
    // The library has no CRL number class: the extension value is a DER INTEGER (RFC 5280 5.2.3).
    new x509.Extension(OID_CRL_NUMBER, false, derInteger(o.number)),
  ];
  if (o.unsupportedCritical) extensions.push(new x509.Extension('1.3.6.1.4.1.55555.1.1', true, new Uint8Array([0x05, 0x00])));
  return x509.X509CrlGenerator.create({
    issuer: o.issuer.cert.subject,
    thisUpdate,
    nextUpdate: o.nextUpdate ?? new Date(thisUpdate.getTime() + VALIDITY_DAYS.crl * DAY_MS),
    signingAlgorithm: SIGN,
    signingKey: o.signingKey ?? o.issuer.key,
    extensions,
    entries: (o.revoked ?? []).map((r) => ({ serialNumber: r.serial, revocationDate: r.date })),
  });
}

function derInteger(n: bigint): Uint8Array {
  let hex = n.toString(16);
  if (hex.length % 2) hex = '0' + hex;
  if (parseInt(hex.slice(0, 2), 16) & 0x80) hex = '00' + hex;
  const body = Buffer.from(hex, 'hex');
  return new Uint8Array([0x02, body.length, ...body]);
}

// ---------------------------------------------------------------------------------------- pair directory

export interface PairState {
  pair_id: string;
  ca_serial: string;
  server_serial: string;
  clients: Array<{ principal: string; serial: string; not_after: string }>;
  revoked: Array<{ serial: string; revoked_at: string }>;
  crl_number: number;
}

export interface PairFiles {
  dir: string;
  ca: string;
  caKey: string;
  cert: string;
  key: string;
  crl: string;
  state: string;
}

export function pairFiles(dir: string): PairFiles {
  return {
    dir,
    ca: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    cert: join(dir, 'server.crt'),
    key: join(dir, 'server.key'),
    crl: join(dir, 'crl.pem'),
    state: join(dir, 'pair.json'),
  };
}

export function clientFiles(dir: string, principal: string): { cert: string; key: string } {
  return { cert: join(dir, 'clients', `${principal}.crt`), key: join(dir, 'clients', `${principal}.key`) };
}

/** Write through a temporary name and rename (a reader never sees half a file). */
export async function writeAtomic(path: string, data: string | Uint8Array, mode = 0o644): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, data, { mode });
  await rename(tmp, path);
}

function checkToken(what: string, v: string): void {
  if (!TOKEN_RE.test(v)) throw new CertError('certs_usage', `${what} ${JSON.stringify(v)} must match [A-Za-z0-9_.:-]+`);
}

export interface CreatePairOptions {
  dir: string;
  pairId: string;
  /** DNS names and IP addresses of the server certificate (default localhost and 127.0.0.1). */
  hosts?: string[];
}

/** Create a pair directory: CA, server certificate and key, an empty CRL, pair.json. */
export async function createPair(o: CreatePairOptions): Promise<PairFiles & { pair_id: string; ca_serial: string; server_serial: string }> {
  checkToken('pair id', o.pairId);
  const f = pairFiles(o.dir);
  const ca = await makeCa({ name: `cell pair ${o.pairId} CA` });
  const server = await makeLeaf({ issuer: ca, kind: 'server', commonName: `cell pair ${o.pairId} service`, hosts: o.hosts ?? ['localhost', '127.0.0.1'] });
  const state: PairState = { pair_id: o.pairId, ca_serial: ca.cert.serialNumber, server_serial: server.serial, clients: [], revoked: [], crl_number: 1 };
  await writeAtomic(f.caKey, await keyPem(ca.key), 0o600);
  await writeAtomic(f.ca, certPem(ca.cert));
  await writeAtomic(f.key, await keyPem(server.keys.privateKey), 0o600);
  await writeAtomic(f.cert, certPem(server.cert));
  await writeAtomic(f.crl, crlPem(await makeCrl({ issuer: ca, number: 1n })));
  await writeState(f, state);
  return { ...f, pair_id: o.pairId, ca_serial: state.ca_serial, server_serial: server.serial };
}

export async function loadIssuer(dir: string): Promise<Issuer> {
  const f = pairFiles(dir);
  return { cert: new x509.X509Certificate(await readFile(f.ca, 'utf8')), key: await importKey(await readFile(f.caKey, 'utf8')) };
}

async function readState(f: PairFiles): Promise<PairState> {
  try {
    return JSON.parse(await readFile(f.state, 'utf8')) as PairState;
  } catch (e) {
    throw new CertError('certs_state', `${f.state}: ${(e as Error).message} (is ${f.dir} a pair directory made by hil certs create-pair?)`);
  }
}

async function writeState(f: PairFiles, s: PairState): Promise<void> {
  await writeAtomic(f.state, JSON.stringify(s, null, 2) + '\n');
}

export interface IssueClientOptions {
  dir: string;
  principal: string;
  /** Test variants: the URIs to put in place of the documented pair (default exactly the two). */
  uris?: string[];
  /** Test variant: issue from this issuer (an intermediate) instead of the pair's CA; chain appended to the cert file. */
  issuer?: Issuer;
  /** Test variant: file name stem (default the principal). */
  name?: string;
}

/** Issue a client certificate for one principal: `clients/<principal>.crt` and `.key`. */
export async function issueClient(o: IssueClientOptions): Promise<{ principal: string; serial: string; cert: string; key: string; not_after: string }> {
  checkToken('principal', o.principal);
  const f = pairFiles(o.dir);
  const state = await readState(f);
  const ca = await loadIssuer(o.dir);
  const uris = o.uris ?? [`svc-principal:${o.principal}`, `svc-pair:${state.pair_id}`];
  const issuer = o.issuer ?? ca;
  const leaf = await makeLeaf({ issuer, kind: 'client', commonName: o.principal, uris });
  const files = clientFiles(o.dir, o.name ?? o.principal);
  await writeAtomic(files.key, await keyPem(leaf.keys.privateKey), 0o600);
  await writeAtomic(files.cert, certPem(leaf.cert) + (o.issuer ? certPem(o.issuer.cert) : ''));
  const notAfter = leaf.cert.notAfter.toISOString();
  state.clients.push({ principal: o.principal, serial: leaf.serial, not_after: notAfter });
  await writeState(f, state);
  return { principal: o.principal, serial: leaf.serial, ...files, not_after: notAfter };
}

export interface RenewCrlOptions {
  dir: string;
  /** Test variants (see CrlOptions). */
  thisUpdate?: Date;
  nextUpdate?: Date;
  signingKey?: CryptoKey;
  unsupportedCritical?: boolean;
}

/** Write a fresh CRL (next number, valid 7 days from now) listing every revoked serial. */
export async function renewCrl(o: RenewCrlOptions): Promise<{ crl: string; number: number; revoked: string[]; next_update: string }> {
  const f = pairFiles(o.dir);
  const state = await readState(f);
  const issuer = await loadIssuer(o.dir);
  state.crl_number += 1;
  const crl = await makeCrl({
    issuer,
    number: BigInt(state.crl_number),
    revoked: state.revoked.map((r) => ({ serial: r.serial, date: new Date(r.revoked_at) })),
    thisUpdate: o.thisUpdate,
    nextUpdate: o.nextUpdate,
    signingKey: o.signingKey,
    unsupportedCritical: o.unsupportedCritical,
  });
  await writeAtomic(f.crl, crlPem(crl));
  await writeState(f, state);
  return { crl: f.crl, number: state.crl_number, revoked: state.revoked.map((r) => r.serial), next_update: crl.nextUpdate!.toISOString() };
}

/** Revoke a serial this pair issued (the server's or a client's) and renew the CRL. */
export async function revokeSerial(dir: string, serialInput: string): Promise<{ serial: string; crl: string; number: number }> {
  const serial = serialInput.toLowerCase().replace(/^0x/, '');
  const f = pairFiles(dir);
  const state = await readState(f);
  const known = state.server_serial === serial || state.clients.some((c) => c.serial === serial);
  if (!known) throw new CertError('certs_unknown_serial', `serial ${serialInput} was not issued by the pair in ${dir}`);
  if (!state.revoked.some((r) => r.serial === serial)) {
    state.revoked.push({ serial, revoked_at: new Date(Date.now() - 1_000).toISOString() });
    await writeState(f, state);
  }
  const r = await renewCrl({ dir });
  return { serial, crl: r.crl, number: r.number };
}
