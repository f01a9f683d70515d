// The DER reader of the remote listener (der.ts) against a general X.509 library on the certificates and
// CRLs the harness makes, and on hand-built elements for the cases the harness never makes.

import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { expect, test } from 'vitest';
import { makeCa, makeCrl, makeLeaf, newKey } from '../../harness/certs.ts';
import { certificateUris, children, DerError, oidText, parseCrl, readTlv, timeOf } from './der.ts';

const tlv = (tag: number, ...parts: Buffer[]): Buffer => {
  const value = Buffer.concat(parts);
  const n = value.length;
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, value]);
};

test('CRLs the harness makes read the same as with a general X.509 library: validity, signed bytes, signature, extensions, entries', async () => {
  const issuer = await makeCa({ name: 'der-ca' });
  const thisUpdate = new Date(Date.UTC(2031, 4, 6, 7, 8, 9));
  const nextUpdate = new Date(Date.UTC(2049, 11, 31, 23, 59, 59));
  const cases = [
    await makeCrl({ issuer, number: 1n }),
    await makeCrl({ issuer, number: 300n, thisUpdate, nextUpdate, unsupportedCritical: true, revoked: [{ serial: '0a1b', date: new Date(Date.UTC(2030, 0, 1)) }, { serial: '7f', date: thisUpdate }] }),
  ];
  for (const lib of cases) {
    const der = Buffer.from(lib.rawData);
    const crl = parseCrl(der);
    expect(crl.thisUpdate.getTime()).toBe(lib.thisUpdate.getTime());
    expect(crl.nextUpdate?.getTime()).toBe(lib.nextUpdate?.getTime());
    expect(crl.hash).toBe((lib.signatureAlgorithm.hash as { name: string }).name);
    expect(crl.extensions.map((e) => [e.type, e.critical, Buffer.from(e.value).toString('hex')])).toEqual(lib.extensions.map((e) => [e.type, e.critical, Buffer.from(e.value).toString('hex')]));
    expect(crl.entries.length).toBe(lib.entries.length);
    // The signed bytes and the signature: the CA's key verifies them.
    const { createPublicKey, verify } = await import('node:crypto');
    const key = createPublicKey(issuer.cert.toString('pem'));
    expect(verify('sha256', crl.tbs, { key, dsaEncoding: 'der' }, crl.signature)).toBe(true);
  }
  expect(parseCrl(Buffer.from(cases[0]!.rawData)).thisUpdate.getTime()).toBeLessThan(Date.now());
  expect(parseCrl(Buffer.from(cases[1]!.rawData)).extensions.find((e) => e.critical)?.type).toBe('1.3.6.1.4.1.55555.1.1');
});

test('a certificate\'s URI names are those of its SubjectAltName, in order; other name kinds and extensions are skipped', async () => {
  const issuer = await makeCa({ name: 'der-ca' });
  const uris = ['svc-principal:p-1', 'https://example.invalid/x', 'svc-pair:cell-a'];
  const leaf = await makeLeaf({ issuer, kind: 'client', commonName: 'c', uris, hosts: ['localhost', '127.0.0.1'] });
  expect(certificateUris(Buffer.from(leaf.cert.rawData))).toEqual(uris);
  const lib = leaf.cert.getExtension(x509.SubjectAlternativeNameExtension)!.names.items.filter((n) => n.type === 'url').map((n) => n.value);
  expect(lib).toEqual(uris);
  // A certificate with no SubjectAltName: no names. The CA has none.
  expect(certificateUris(Buffer.from(issuer.cert.rawData))).toEqual([]);
  // Server certificate: DNS and IP names only.
  const server = await makeLeaf({ issuer, kind: 'server', commonName: 's', hosts: ['localhost'], key: await newKey() });
  expect(certificateUris(Buffer.from(server.cert.rawData))).toEqual([]);
});

test('elements: lengths short and long, truncation, trailing bytes, OIDs, both time forms', () => {
  expect(readTlv(Buffer.from([0x04, 0x02, 0xaa, 0xbb])).value).toEqual(Buffer.from([0xaa, 0xbb]));
  const long = tlv(0x04, Buffer.alloc(200, 1));
  expect(readTlv(long).value.length).toBe(200);
  expect(() => readTlv(Buffer.from([0x04, 0x05, 0x00]))).toThrow(DerError);
  expect(() => readTlv(Buffer.from([0x04, 0x85, 0, 0, 0, 0, 1]))).toThrow(DerError);
  expect(() => readTlv(Buffer.from([0x04]))).toThrow(DerError);
  expect(() => children(Buffer.from([0x04, 0x01, 0x00, 0x04]))).toThrow(DerError);
  expect(oidText(Buffer.from([0x55, 0x1d, 0x11]))).toBe('2.5.29.17');
  expect(oidText(Buffer.from([0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b]))).toBe('1.2.840.113549.1.1.11');
  expect(() => oidText(Buffer.from([0x2a, 0x86]))).toThrow(DerError);
  const utc = (s: string) => timeOf({ tag: 0x17, raw: Buffer.alloc(0), value: Buffer.from(s, 'latin1') });
  const gen = (s: string) => timeOf({ tag: 0x18, raw: Buffer.alloc(0), value: Buffer.from(s, 'latin1') });
  // RFC 5280 4.1.2.5.1: two-digit years 50..99 are 19xx, 00..49 20xx.
  expect(utc('491231235959Z').toISOString()).toBe('2049-12-31T23:59:59.000Z');
  expect(utc('500101000000Z').toISOString()).toBe('1950-01-01T00:00:00.000Z');
  expect(gen('20500101000000Z').toISOString()).toBe('2050-01-01T00:00:00.000Z');
  expect(gen('20500101000000.25Z').toISOString()).toBe('2050-01-01T00:00:00.250Z');
  for (const bad of ['20010100Z', '500101000000+0100', '5001010000xxZ']) expect(() => utc(bad), bad).toThrow(DerError);
});

test('a CRL that is not a CertificateList is refused with DerError; an RSASSA-PSS algorithm takes the hash of its parameters', () => {
  expect(() => parseCrl(Buffer.from('AAAA', 'base64'))).toThrow(DerError);
  const oid = (text: string) => {
    const arcs = text.split('.').map(Number);
    const out = [arcs[0]! * 40 + arcs[1]!];
    for (const a of arcs.slice(2)) {
      const b = [a & 0x7f];
      for (let v = Math.floor(a / 128); v > 0; v = Math.floor(v / 128)) b.unshift((v & 0x7f) | 0x80);
      out.push(...b);
    }
    return tlv(0x06, Buffer.from(out));
  };
  const alg = (id: string, params?: Buffer) => tlv(0x30, oid(id), ...(params ? [params] : []));
  const name = tlv(0x30, tlv(0x31, tlv(0x30, oid('2.5.4.3'), tlv(0x0c, Buffer.from('ca')))));
  const time = tlv(0x17, Buffer.from('300101000000Z'));
  const crl = (sigAlg: Buffer, tbsExtra: Buffer[] = []) =>
    tlv(0x30, tlv(0x30, tlv(0x02, Buffer.from([1])), sigAlg, name, time, ...tbsExtra), sigAlg, tlv(0x03, Buffer.from([0, 1, 2])));
  expect(parseCrl(crl(alg('1.2.840.10045.4.3.3'))).hash).toBe('SHA-384');
  expect(parseCrl(crl(alg('1.2.840.113549.1.1.13'))).hash).toBe('SHA-512');
  expect(parseCrl(crl(alg('1.2.840.10045.4.1'))).hash).toBe('SHA-1');
  expect(parseCrl(crl(alg('1.3.101.112'))).hash).toBeUndefined(); // Ed25519: no hash
  const pss = (hash?: string) => alg('1.2.840.113549.1.1.10', tlv(0x30, ...(hash ? [tlv(0xa0, alg(hash))] : [])));
  expect(parseCrl(crl(pss('2.16.840.1.101.3.4.2.1'))).hash).toBe('SHA-256');
  expect(parseCrl(crl(pss())).hash).toBe('SHA-1');
  const parsed = parseCrl(crl(alg('1.2.840.10045.4.3.2')));
  expect(parsed.nextUpdate).toBeUndefined();
  expect(parsed.signature).toEqual(Buffer.from([1, 2]));
  // Trailing bytes after the CertificateList, an unknown field in tbsCertList, a BOOLEAN of two bytes.
  expect(() => parseCrl(Buffer.concat([crl(alg('1.2.840.10045.4.3.2')), Buffer.from([0])]))).toThrow(DerError);
  expect(() => parseCrl(crl(alg('1.2.840.10045.4.3.2'), [tlv(0x04, Buffer.from([1]))]))).toThrow(DerError);
  const badExt = tlv(0xa0, tlv(0x30, tlv(0x30, oid('2.5.29.20'), tlv(0x01, Buffer.from([0xff, 0xff])), tlv(0x04, Buffer.from([2, 1, 1])))));
  expect(() => parseCrl(crl(alg('1.2.840.10045.4.3.2'), [badExt]))).toThrow(DerError);
  const critExt = tlv(0xa0, tlv(0x30, tlv(0x30, oid('2.5.29.20'), tlv(0x01, Buffer.from([0xff])), tlv(0x04, Buffer.from([2, 1, 1])))));
  expect(parseCrl(crl(alg('1.2.840.10045.4.3.2'), [critExt])).extensions).toEqual([{ type: '2.5.29.20', critical: true, value: Buffer.from([2, 1, 1]) }]);
});
