// The few X.509 structures the remote listener reads (RFC 5280 section 5.1 CertificateList, section 4.1
// Certificate's extensions, section 4.2.1.6 SubjectAltName), read straight from their DER bytes.
//
// A general X.509 library was used here before; loading it (a few hundred CommonJS files) was the largest
// single cost of every stack process with a remote listener, and parsing a client certificate with it was
// most of a remote handshake's own work (bench/README.md, the stack hosts' profile). What the listener
// needs is small: the CRL's signature algorithm, signed bytes, validity window and extensions' criticality,
// and a certificate's URI names. Everything else (signatures, chains, revocation) is OpenSSL's and
// node:crypto's.

/** One DER element: its tag byte, where its value starts and ends in the buffer it was read from. */
export interface Tlv {
  tag: number;
  /** The whole element (tag, length and value). */
  raw: Buffer;
  value: Buffer;
}

export class DerError extends Error {}

/** The element at `at` in `b` (definite lengths only, as DER requires; single-byte tags). */
export function readTlv(b: Buffer, at = 0): Tlv {
  if (at + 2 > b.length) throw new DerError('truncated DER');
  const tag = b[at]!;
  if ((tag & 0x1f) === 0x1f) throw new DerError('unsupported DER tag');
  const first = b[at + 1]!;
  let header = 2;
  let length = first;
  if (first >= 0x80) {
    const n = first & 0x7f;
    if (n < 1 || n > 4 || at + 2 + n > b.length) throw new DerError('bad DER length');
    length = 0;
    for (let k = 0; k < n; k++) length = length * 256 + b[at + 2 + k]!;
    header = 2 + n;
  }
  if (at + header + length > b.length) throw new DerError('truncated DER');
  return { tag, raw: b.subarray(at, at + header + length), value: b.subarray(at + header, at + header + length) };
}

/** The elements of a constructed value, in order; the value must be exactly their concatenation. */
export function children(value: Buffer): Tlv[] {
  const out: Tlv[] = [];
  for (let i = 0; i < value.length; ) {
    const t = readTlv(value, i);
    out.push(t);
    i += t.raw.length;
  }
  return out;
}

/** A single DER element that fills `b` exactly, with the tag expected. */
export function whole(b: Buffer, tag: number, what: string): Tlv {
  const t = readTlv(b, 0);
  if (t.tag !== tag) throw new DerError(`${what}: unexpected tag 0x${t.tag.toString(16)}`);
  if (t.raw.length !== b.length) throw new DerError(`${what}: trailing bytes`);
  return t;
}

const SEQUENCE = 0x30;
const INTEGER = 0x02;
const BOOLEAN = 0x01;
const OCTET_STRING = 0x04;
const BIT_STRING = 0x03;
const OID = 0x06;
const UTC_TIME = 0x17;
const GENERALIZED_TIME = 0x18;

function expectTag(t: Tlv | undefined, tag: number, what: string): Tlv {
  if (!t || t.tag !== tag) throw new DerError(`${what}: expected tag 0x${tag.toString(16)}`);
  return t;
}

/** Dotted text of an OBJECT IDENTIFIER's value. */
export function oidText(v: Buffer): string {
  if (v.length === 0) throw new DerError('empty OBJECT IDENTIFIER');
  const arcs: number[] = [];
  let n = 0;
  for (let i = 0; i < v.length; i++) {
    const byte = v[i]!;
    n = n * 128 + (byte & 0x7f);
    if (n > Number.MAX_SAFE_INTEGER) throw new DerError('OBJECT IDENTIFIER arc too large');
    if (!(byte & 0x80)) {
      arcs.push(n);
      n = 0;
    } else if (i === v.length - 1) throw new DerError('truncated OBJECT IDENTIFIER');
  }
  const first = arcs[0]!;
  const head = first < 40 ? [0, first] : first < 80 ? [1, first - 40] : [2, first - 80];
  return [...head, ...arcs.slice(1)].join('.');
}

/** UTCTime (RFC 5280 4.1.2.5.1: years 50-99 are 19xx) or GeneralizedTime, in UTC ("Z"). */
export function timeOf(t: Tlv): Date {
  const s = t.value.toString('latin1');
  let m: RegExpExecArray | null;
  let ms: number;
  if (t.tag === UTC_TIME && (m = /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)?Z$/.exec(s))) {
    const yy = Number(m[1]);
    ms = Date.UTC(yy >= 50 ? 1900 + yy : 2000 + yy, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6] ?? 0));
  } else if (t.tag === GENERALIZED_TIME && (m = /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(?:\.(\d+))?Z$/.exec(s))) {
    ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])) + (m[7] ? Math.floor(Number(`0.${m[7]}`) * 1000) : 0);
  } else throw new DerError(`unreadable time ${JSON.stringify(s)}`);
  if (!Number.isFinite(ms)) throw new DerError(`unreadable time ${JSON.stringify(s)}`);
  return new Date(ms);
}

export interface Extension {
  type: string;
  critical: boolean;
  /** The extnValue OCTET STRING's content. */
  value: Buffer;
}

/** Extensions ::= SEQUENCE SIZE (1..MAX) OF Extension (RFC 5280 4.1). */
function extensionsOf(seq: Tlv): Extension[] {
  expectTag(seq, SEQUENCE, 'Extensions');
  return children(seq.value).map((e) => {
    const [id, second, third] = children(expectTag(e, SEQUENCE, 'Extension').value);
    let critical = false;
    let octets = second;
    if (second?.tag === BOOLEAN) {
      if (second.value.length !== 1) throw new DerError('Extension: bad BOOLEAN');
      critical = second.value[0] !== 0;
      octets = third;
    }
    return { type: oidText(expectTag(id, OID, 'extnID').value), critical, value: expectTag(octets, OCTET_STRING, 'extnValue').value };
  });
}

/** Hash of a signature algorithm, named as WebCrypto does, where the algorithm is one with a hash. */
const SIGNATURE_HASHES: Record<string, string> = {
  '1.2.840.113549.1.1.5': 'SHA-1', // sha1WithRSAEncryption
  '1.2.840.113549.1.1.11': 'SHA-256',
  '1.2.840.113549.1.1.12': 'SHA-384',
  '1.2.840.113549.1.1.13': 'SHA-512',
  '1.2.840.10045.4.1': 'SHA-1', // ecdsa-with-SHA1
  '1.2.840.10045.4.3.2': 'SHA-256',
  '1.2.840.10045.4.3.3': 'SHA-384',
  '1.2.840.10045.4.3.4': 'SHA-512',
};
const HASH_OIDS: Record<string, string> = {
  '1.3.14.3.2.26': 'SHA-1',
  '2.16.840.1.101.3.4.2.1': 'SHA-256',
  '2.16.840.1.101.3.4.2.2': 'SHA-384',
  '2.16.840.1.101.3.4.2.3': 'SHA-512',
};
const RSASSA_PSS = '1.2.840.113549.1.1.10';

/** The hash an AlgorithmIdentifier signs with (RSASSA-PSS: its parameters' hashAlgorithm, SHA-1 when absent, RFC 4055). */
function signatureHash(alg: Tlv): string | undefined {
  const [id, params] = children(expectTag(alg, SEQUENCE, 'AlgorithmIdentifier').value);
  const oid = oidText(expectTag(id, OID, 'algorithm').value);
  if (oid !== RSASSA_PSS) return SIGNATURE_HASHES[oid];
  const hashField = params?.tag === SEQUENCE ? children(params.value).find((c) => c.tag === 0xa0) : undefined;
  if (!hashField) return 'SHA-1';
  const [hashAlg] = children(hashField.value);
  const [hashId] = children(expectTag(hashAlg, SEQUENCE, 'hashAlgorithm').value);
  return HASH_OIDS[oidText(expectTag(hashId, OID, 'hashAlgorithm').value)];
}

export interface Crl {
  /** The DER of tbsCertList: the bytes the signature covers. */
  tbs: Buffer;
  /** The signatureValue BIT STRING's bits (unused-bits byte removed). */
  signature: Buffer;
  /** The hash of signatureAlgorithm ('SHA-256', ...), undefined for an algorithm without one or unknown. */
  hash: string | undefined;
  thisUpdate: Date;
  nextUpdate: Date | undefined;
  extensions: Extension[];
  /** Each revoked certificate's entry extensions. */
  entries: Array<{ extensions: Extension[] }>;
}

/** A CertificateList (RFC 5280 5.1) from its DER; DerError when it is not one. */
export function parseCrl(der: Buffer): Crl {
  const list = whole(der, SEQUENCE, 'CertificateList');
  const [tbs, sigAlg, sigValue, extra] = children(list.value);
  if (extra) throw new DerError('CertificateList: extra fields');
  expectTag(tbs, SEQUENCE, 'tbsCertList');
  const hash = signatureHash(sigAlg!);
  const bits = expectTag(sigValue, BIT_STRING, 'signatureValue').value;
  if (bits.length < 1) throw new DerError('signatureValue: empty BIT STRING');
  const f = children(tbs!.value);
  let i = 0;
  if (f[i]?.tag === INTEGER) i++; // version
  expectTag(f[i++], SEQUENCE, 'signature');
  expectTag(f[i++], SEQUENCE, 'issuer');
  const thisField = f[i++];
  if (!thisField || (thisField.tag !== UTC_TIME && thisField.tag !== GENERALIZED_TIME)) throw new DerError('thisUpdate: not a time');
  const thisUpdate = timeOf(thisField);
  let nextUpdate: Date | undefined;
  if (f[i]?.tag === UTC_TIME || f[i]?.tag === GENERALIZED_TIME) nextUpdate = timeOf(f[i++]!);
  const entries: Crl['entries'] = [];
  if (f[i]?.tag === SEQUENCE) {
    for (const entry of children(f[i++]!.value)) {
      const [serial, date, exts, more] = children(expectTag(entry, SEQUENCE, 'revoked certificate').value);
      expectTag(serial, INTEGER, 'userCertificate');
      if (!date) throw new DerError('revocationDate missing');
      timeOf(date);
      if (more) throw new DerError('revoked certificate: extra fields');
      entries.push({ extensions: exts ? extensionsOf(exts) : [] });
    }
  }
  let extensions: Extension[] = [];
  if (f[i]?.tag === 0xa0) {
    const [seq, more] = children(f[i++]!.value);
    if (!seq || more) throw new DerError('crlExtensions: one Extensions expected');
    extensions = extensionsOf(seq);
  }
  if (i !== f.length) throw new DerError('tbsCertList: unexpected fields');
  return { tbs: tbs!.raw, signature: bits.subarray(1), hash, thisUpdate, nextUpdate, extensions, entries };
}

const SUBJECT_ALT_NAME = '2.5.29.17';
/** GeneralName uniformResourceIdentifier: [6] IMPLICIT IA5String. */
const URI_NAME = 0x86;

/**
 * The uniformResourceIdentifier names of a certificate's first SubjectAltName extension (RFC 5280
 * 4.2.1.6), in order; none when it has no such extension. DerError when the certificate is unreadable.
 */
export function certificateUris(der: Buffer): string[] {
  const cert = whole(der, SEQUENCE, 'Certificate');
  const [tbs] = children(cert.value);
  const fields = children(expectTag(tbs, SEQUENCE, 'tbsCertificate').value);
  const extField = fields.find((t) => t.tag === 0xa3);
  if (!extField) return [];
  const [seq] = children(extField.value);
  const san = extensionsOf(expectTag(seq, SEQUENCE, 'extensions')).find((e) => e.type === SUBJECT_ALT_NAME);
  if (!san) return [];
  const names = whole(san.value, SEQUENCE, 'GeneralNames');
  return children(names.value)
    .filter((n) => n.tag === URI_NAME)
    .map((n) => n.value.toString('latin1'));
}
