// Unit tests of the remote listener's pure parts: the --remote-listen address and the certificate identity.

import { expect, test } from 'vitest';
import { createPair, issueClient } from '../../harness/certs.ts';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { identityOf, parseListen, RemoteStartupError } from './remote.ts';

test('--remote-listen: host:port, defaults 127.0.0.1 and 8443 (document 1 part 1), bad values refused', () => {
  expect(parseListen('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
  expect(parseListen('10.0.0.7:9443')).toEqual({ host: '10.0.0.7', port: 9443 });
  expect(parseListen('127.0.0.1')).toEqual({ host: '127.0.0.1', port: 8443 });
  expect(parseListen(':8500')).toEqual({ host: '127.0.0.1', port: 8500 });
  expect(parseListen('[::1]:8443')).toEqual({ host: '::1', port: 8443 });
  for (const bad of ['127.0.0.1:65536', '127.0.0.1:x', 'a b:1', '127.0.0.1:123456']) expect(() => parseListen(bad), bad).toThrow(RemoteStartupError);
});

test('identity: exactly one svc-principal and one svc-pair URI, tokens, pair equal to --pair-id', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'remote-unit-'));
  try {
    await createPair({ dir, pairId: 'cell-a' });
    const raw = async (name: string, uris?: string[]) => {
      const c = await issueClient({ dir, principal: 'p-1', uris, name });
      return new X509Certificate(await readFile(c.cert)).raw;
    };
    expect(identityOf(await raw('ok'), 'cell-a')).toEqual({ principal: 'p-1' });
    expect(identityOf(await raw('ok2'), 'cell-b')).toEqual({ refused: 'svc-pair cell-a differs from --pair-id cell-b' });
    // Other URIs beside the two are ignored.
    expect(identityOf(await raw('extra', ['https://example.invalid/x', 'svc-principal:p-1', 'svc-pair:cell-a']), 'cell-a')).toEqual({ principal: 'p-1' });
    expect(identityOf(await raw('np', ['svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/0 svc-principal/) });
    expect(identityOf(await raw('tp', ['svc-principal:a', 'svc-principal:b', 'svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/2 svc-principal/) });
    expect(identityOf(await raw('nopair', ['svc-principal:a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/0 svc-pair/) });
    expect(identityOf(await raw('tok', ['svc-principal:a/b', 'svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/not a token/) });
    expect(identityOf(await raw('empty', ['svc-principal:', 'svc-pair:cell-a']), 'cell-a')).toMatchObject({ refused: expect.stringMatching(/not a token/) });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
