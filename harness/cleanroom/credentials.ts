// The clean-room remote listener's credentials (document 1 part 5 items 2 to 6), read from document 1 alone:
// the four files (`--remote-ca`, `--remote-cert`, `--remote-key`, `--remote-crl`) loaded and checked as one
// set, the CRL's validity window, and the judgement of one client certificate. Pure functions over the
// files' bytes and the time of the handshake; harness/cleanroom/remote.ts decides when to call them.
//
// Certificates are judged with node:crypto's X509Certificate (signatures, key match); the CRL and the
// extensions with @peculiar/x509, which parses without a crypto provider; the CRL's signature is checked
// over its DER (the first element of CertificateList, RFC 5280 5.1) with node:crypto, so that every check
// is synchronous and a handshake never waits on a promise.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createPrivateKey, verify as verifySignature, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** The four credential files of part 5 item 6. */
export interface CredentialFiles {
  ca: string;
  cert: string;
  key: string;
  crl: string;
}

/** A complete, checked set: what the TLS context is made of, and what every handshake is judged by. */
export interface Credentials {
  /** PEM texts for node:tls (the server certificate with the rest of its file as its chain). */
  tls: { ca: string; cert: string; key: string };
  ca: X509Certificate;
  /** The CA's validity: a handshake outside it is refused (the chain cannot be verified then). */
  caValid: { from: Date; to: Date };
  crl: LoadedCrl;
}

export interface LoadedCrl {
  thisUpdate: Date;
  /** RFC 5280 5.1.2.5: conforming CRLs carry it; one without it is refused at load. */
  nextUpdate: Date;
  /** Revoked serial numbers as integers (a serial's hex spelling, case and leading zeros differ between libraries). */
  revoked: Set<bigint>;
}

/** A check of part 5 that failed: its message is the log's and the start-up error's text. */
export class CredentialError extends Error {}

const OID = {
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectAltName: '2.5.29.17',
  subjectKeyId: '2.5.29.14',
  authorityKeyId: '2.5.29.35',
  crlNumber: '2.5.29.20',
  crlReason: '2.5.29.21',
  invalidityDate: '2.5.29.24',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  anyExtendedKeyUsage: '2.5.29.37.0',
};
/** Extensions this listener understands, per object (a critical one outside these refuses the object). */
const KNOWN_CERT_EXTENSIONS = new Set([OID.basicConstraints, OID.keyUsage, OID.extKeyUsage, OID.subjectAltName, OID.subjectKeyId, OID.authorityKeyId]);
const KNOWN_CRL_EXTENSIONS = new Set([OID.crlNumber, OID.authorityKeyId]);
const KNOWN_ENTRY_EXTENSIONS = new Set([OID.crlReason, OID.invalidityDate]);

/** Part 5 item 3: `svc-principal:<id>` and `svc-pair:<pair>` values. */
export const TOKEN = /^[A-Za-z0-9_.:-]+$/;

/** The PEM blocks of a text, with their labels. */
function pemBlocks(text: string): Array<{ label: string; pem: string }> {
  const out: Array<{ label: string; pem: string }> = [];
  const re = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;
  for (let m = re.exec(text); m; m = re.exec(text)) out.push({ label: m[1]!, pem: m[0] });
  return out;
}

function read(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new CredentialError(`${flag} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** Load and check the four files as one set (start-up, and every reload after a change). Throws CredentialError. */
export function loadCredentials(files: CredentialFiles): Credentials {
  const caText = read(files.ca, '--remote-ca');
  const certText = read(files.cert, '--remote-cert');
  const keyText = read(files.key, '--remote-key');
  const crlText = read(files.crl, '--remote-crl');

  // Item 6: exactly one self-signed CA certificate.
  const caBlocks = pemBlocks(caText);
  if (caBlocks.length !== 1 || caBlocks[0]!.label !== 'CERTIFICATE') throw new CredentialError(`--remote-ca holds ${caBlocks.length} PEM blocks, not exactly one CERTIFICATE`);
  const ca = parseCert(caBlocks[0]!.pem, '--remote-ca');
  if (!ca.ca) throw new CredentialError('--remote-ca is not a CA certificate (basic constraints)');
  if (!ca.checkIssued(ca) || !ca.verify(ca.publicKey)) throw new CredentialError('--remote-ca is not self-signed');

  // The server certificate (first block; the rest is sent as its chain) and its key. Whoever issued it is
  // the clients' affair: they verify it, the service does not.
  const certBlocks = pemBlocks(certText).filter((b) => b.label === 'CERTIFICATE');
  if (certBlocks.length === 0) throw new CredentialError('--remote-cert holds no CERTIFICATE block');
  const server = parseCert(certBlocks[0]!.pem, '--remote-cert');
  let key: KeyObject;
  try {
    key = createPrivateKey(keyText);
  } catch (e) {
    throw new CredentialError(`--remote-key: not a private key (${(e as Error).message})`);
  }
  if (!server.checkPrivateKey(key)) throw new CredentialError('--remote-key does not match --remote-cert');

  const parsed = new x509.X509Certificate(new Uint8Array(ca.raw));
  return { tls: { ca: caBlocks[0]!.pem, cert: certText, key: keyText }, ca, caValid: { from: parsed.notBefore, to: parsed.notAfter }, crl: loadCrl(crlText, ca) };
}

function parseCert(pem: string, flag: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (e) {
    throw new CredentialError(`${flag}: not a certificate (${(e as Error).message})`);
  }
}

/** Item 4: the CRL is the CA's (issuer and signature), with no critical extension this listener does not understand. */
export function loadCrl(text: string, ca: X509Certificate): LoadedCrl {
  const blocks = pemBlocks(text);
  if (blocks.length !== 1 || blocks[0]!.label !== 'X509 CRL') throw new CredentialError(`--remote-crl holds ${blocks.length} PEM blocks, not exactly one X509 CRL`);
  let crl: x509.X509Crl;
  try {
    crl = new x509.X509Crl(blocks[0]!.pem);
  } catch (e) {
    throw new CredentialError(`--remote-crl: not a CRL (${(e as Error).message})`);
  }
  if (crl.issuer !== new x509.X509Certificate(new Uint8Array(ca.raw)).subject) throw new CredentialError(`--remote-crl is issued by ${crl.issuer}, not by the CA`);
  if (!crlSignedBy(new Uint8Array(crl.rawData), crl.signatureAlgorithm, ca.publicKey)) throw new CredentialError('--remote-crl is not signed by the CA');
  for (const e of crl.extensions) if (e.critical && !KNOWN_CRL_EXTENSIONS.has(e.type)) throw new CredentialError(`--remote-crl has an unsupported critical extension ${e.type}`);
  const revoked = new Set<bigint>();
  for (const entry of crl.entries) {
    for (const e of entry.extensions) if (e.critical && !KNOWN_ENTRY_EXTENSIONS.has(e.type)) throw new CredentialError(`--remote-crl entry ${entry.serialNumber} has an unsupported critical extension ${e.type}`);
    revoked.add(BigInt(`0x${entry.serialNumber}`));
  }
  if (!crl.nextUpdate) throw new CredentialError('--remote-crl has no nextUpdate (RFC 5280 5.1.2.5)');
  return { thisUpdate: crl.thisUpdate, nextUpdate: crl.nextUpdate, revoked };
}

/** Why the CRL is outside its validity window at `now` (the documented text first), or undefined. */
export function crlNotCurrent(crl: LoadedCrl, now: Date): string | undefined {
  if (now < crl.thisUpdate) return `remote CRL not current: not valid before ${crl.thisUpdate.toISOString()}`;
  if (now > crl.nextUpdate) return `remote CRL not current: expired at ${crl.nextUpdate.toISOString()}`;
  return undefined;
}

/** The DER TLV at `off`: where its content starts and where it ends. */
function tlv(der: Uint8Array, off: number): { content: number; end: number } {
  let len = der[off + 1]!;
  let content = off + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + der[off + 2 + i]!;
    content += n;
  }
  if (content + len > der.length) throw new CredentialError('--remote-crl: truncated DER');
  return { content, end: content + len };
}

/** CertificateList ::= SEQUENCE { tbsCertList, signatureAlgorithm, signatureValue BIT STRING } (RFC 5280 5.1). */
function crlSignedBy(der: Uint8Array, alg: x509.HashedAlgorithm, key: KeyObject): boolean {
  const hash = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' }[(alg.hash as { name?: string })?.name ?? ''];
  const name = (alg as { name?: string }).name;
  if (!hash || (name !== 'ECDSA' && name !== 'RSASSA-PKCS1-v1_5')) return false;
  const outer = tlv(der, 0);
  const tbs = tlv(der, outer.content);
  const algorithm = tlv(der, tbs.end);
  const sig = tlv(der, algorithm.end);
  if (der[algorithm.end] !== 0x03 || der[sig.content] !== 0) return false;
  try {
    return verifySignature(hash, der.subarray(outer.content, tbs.end), key, der.subarray(sig.content + 1, sig.end));
  } catch {
    return false;
  }
}

/** The identity of an accepted client certificate (part 5 item 3). */
export interface ClientIdentity {
  principal: string;
  pair: string;
  serial: string;
}

/**
 * Judge the certificate a client presented in a completed handshake (items 2 to 4): present, issued and
 * signed directly by the CA (an intermediate's certificate is not), not itself a CA, inside its validity,
 * fit for client authentication, not revoked, and naming exactly one principal and the service's pair.
 * Returns the identity, or why it is refused.
 */
export function judgeClient(peer: X509Certificate | undefined, creds: Credentials, pairId: string, now: Date): ClientIdentity | string {
  if (!peer) return 'no client certificate';
  if (now < creds.caValid.from || now > creds.caValid.to) return 'the CA certificate is outside its validity';
  if (!peer.checkIssued(creds.ca) || !peer.verify(creds.ca.publicKey)) return `client certificate ${peer.serialNumber.toLowerCase()} is not issued directly by the CA (issuer ${peer.issuer.replace(/\n/g, ', ')})`;
  const cert = new x509.X509Certificate(new Uint8Array(peer.raw));
  const serial = cert.serialNumber.toLowerCase();
  if (peer.ca) return `client certificate ${serial} is a CA certificate`;
  if (now < cert.notBefore || now > cert.notAfter) return `client certificate ${serial} is outside its validity`;
  for (const e of cert.extensions) if (e.critical && !KNOWN_CERT_EXTENSIONS.has(e.type)) return `client certificate ${serial} has an unsupported critical extension ${e.type}`;
  const usage = cert.getExtension(x509.KeyUsagesExtension);
  if (usage && !(usage.usages & x509.KeyUsageFlags.digitalSignature)) return `client certificate ${serial} is not for digital signatures (key usage)`;
  const eku = cert.getExtension(x509.ExtendedKeyUsageExtension);
  if (eku && !eku.usages.some((u) => u === OID.clientAuth || u === OID.anyExtendedKeyUsage)) return `client certificate ${serial} is not for client authentication (extended key usage)`;
  if (creds.crl.revoked.has(BigInt(`0x${serial}`))) return `client certificate ${serial} is revoked by the CRL`;
  const uris = (cert.getExtension(x509.SubjectAlternativeNameExtension)?.names.items ?? []).filter((n) => n.type === 'url').map((n) => n.value);
  const principals = uris.filter((u) => u.startsWith('svc-principal:')).map((u) => u.slice('svc-principal:'.length));
  const pairs = uris.filter((u) => u.startsWith('svc-pair:')).map((u) => u.slice('svc-pair:'.length));
  if (principals.length !== 1) return `client certificate ${serial} names ${principals.length} principals (svc-principal URIs), not one`;
  if (pairs.length !== 1) return `client certificate ${serial} names ${pairs.length} pairs (svc-pair URIs), not one`;
  const [principal, pair] = [principals[0]!, pairs[0]!];
  if (!TOKEN.test(principal)) return `client certificate ${serial}: principal ${JSON.stringify(principal)} is not a token of [A-Za-z0-9_.:-]`;
  if (!TOKEN.test(pair)) return `client certificate ${serial}: pair ${JSON.stringify(pair)} is not a token of [A-Za-z0-9_.:-]`;
  if (pair !== pairId) return `client certificate ${serial} is for pair ${pair}, this service is ${pairId}`;
  return { principal, pair, serial };
}
