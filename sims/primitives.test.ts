// The reference system's primitives (sims/primitives.ts, sims/json.ts canonicalJson, envelope payloadKey):
// each limit from both sides, each wording, each body-reader mode against a real HTTP server.

import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { CanonicalError, canonicalJson, decodeJson, JsonObject } from './json.ts';
import { CursorError, parseAfterCursor, parseNonzeroU64, parseProgramArgs, parseU64, readBoundedBody, REQUEST_PREFIX_BYTES, U64_DECIMAL, U64_MAX, type BodyBound } from './primitives.ts';
import { payloadKey, type Request } from './service/envelope.ts';

const enc = (s: string) => new TextEncoder().encode(s);

describe('uint64 text', () => {
  test('the limit from both sides, zero, leading zeros, signs and 21 digits', () => {
    expect(U64_MAX).toBe(18446744073709551615n);
    expect(parseU64('18446744073709551615')).toBe(U64_MAX);
    expect(parseU64('18446744073709551616')).toBeUndefined();
    expect(parseU64('99999999999999999999')).toBeUndefined(); // 20 digits, over the limit
    expect(parseU64('100000000000000000000')).toBeUndefined(); // 21 digits
    expect(parseU64('0')).toBe(0n);
    expect(parseU64('7')).toBe(7n);
    for (const bad of ['', '01', '00', '-1', '+1', '1.0', '1e3', ' 1', '1 ', '0x10']) expect(parseU64(bad), bad).toBeUndefined();
    expect(U64_DECIMAL.test('99999999999999999999')).toBe(true); // the regex bounds digits; the value is compared after
  });

  test('nonzero: 0 is refused, 1 and the maximum are taken', () => {
    expect(parseNonzeroU64('0')).toBeUndefined();
    expect(parseNonzeroU64('1')).toBe(1n);
    expect(parseNonzeroU64('18446744073709551615')).toBe(U64_MAX);
    expect(parseNonzeroU64('18446744073709551616')).toBeUndefined();
  });

  test('the one request prefix is 16384 bytes (document 1 part 8)', () => {
    expect(REQUEST_PREFIX_BYTES).toBe(16384);
  });
});

describe('parseProgramArgs', () => {
  afterEach(() => vi.restoreAllMocks());
  const capture = () => {
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    return { out: () => out.mock.calls.map((c) => String(c[0])).join(''), err: () => err.mock.calls.map((c) => String(c[0])).join('') };
  };
  const options = { port: { type: 'string' }, quiet: { type: 'boolean' } } as const;

  test('the flags when they parse; --help and -h: the usage on stdout, 0; an unknown flag or a missing value: the message and the usage on stderr, 2', () => {
    let io = capture();
    const ok = parseProgramArgs({ args: ['--port', '7', '--quiet'], options }, 'USAGE\n');
    expect(typeof ok === 'number' ? ok : ok.values).toEqual({ port: '7', quiet: true });
    expect([io.out(), io.err()]).toEqual(['', '']);
    for (const h of ['--help', '-h']) {
      vi.restoreAllMocks();
      io = capture();
      expect(parseProgramArgs({ args: ['--port', '7', h], options }, 'USAGE\n')).toBe(0);
      expect([io.out(), io.err()]).toEqual(['USAGE\n', '']);
    }
    for (const bad of [['--bogus'], ['--port'], ['stray']]) {
      vi.restoreAllMocks();
      io = capture();
      expect(parseProgramArgs({ args: bad, options }, 'USAGE\n')).toBe(2);
      expect(io.out()).toBe('');
      expect(io.err()).toMatch(/^.+\nUSAGE\n$/);
    }
    vi.restoreAllMocks();
    const pos = parseProgramArgs({ args: ['file.rec', '--port', '1'], options, allowPositionals: true }, 'USAGE\n');
    expect(typeof pos === 'number' ? pos : pos.positionals).toEqual(['file.rec']);
  });
});

describe('the after cursor', () => {
  const q = (s: string) => new URLSearchParams(s);
  const why = (s: string) => {
    try {
      parseAfterCursor(q(s));
    } catch (e) {
      expect(e).toBeInstanceOf(CursorError);
      return (e as Error).message;
    }
    return 'accepted';
  };

  test('absent is 0; one canonical decimal up to 2^64-1 is its value', () => {
    expect(parseAfterCursor(q(''))).toBe(0n);
    expect(parseAfterCursor(q('other=1'))).toBe(0n);
    expect(parseAfterCursor(q('after=0'))).toBe(0n);
    expect(parseAfterCursor(q('after=42'))).toBe(42n);
    expect(parseAfterCursor(q('after=18446744073709551615'))).toBe(U64_MAX);
  });

  test('one wording for both endpoints: repeated, not one decimal, past the limit', () => {
    expect(why('after=1&after=1')).toBe('after must be given at most once');
    for (const bad of ['after=', 'after=01', 'after=-1', 'after=%2B1', 'after=1.5', 'after=1e2', 'after=123456789012345678901']) {
      expect(why(bad), bad).toBe('after must be one unsigned decimal number');
    }
    expect(why('after=18446744073709551616')).toBe('after exceeds uint64');
  });
});

describe('canonical JSON: one number rule', () => {
  test('integers exact, other numbers as Number::toString, -0 as 0, keys sorted, undefined left out', () => {
    expect(canonicalJson({ b: 18446744073709551617n, a: [1, 0.1, -0, 1e21, 1.5e-7], c: undefined })).toBe('{"a":[1,0.1,0,1e+21,1.5e-7],"b":18446744073709551617}');
    const decoded = decodeJson(enc('{"z":1.0,"y":-0,"x":-0.0,"w":18446744073709551617,"v":1E2,"é":"é"}'));
    expect(canonicalJson(decoded)).toBe('{"v":100,"w":18446744073709551617,"x":0,"y":0,"z":1,"é":"é"}');
  });

  test('a decoded value and the same plain data write the same text', () => {
    const decoded = decodeJson(enc('{"n":2.50,"i":-3,"l":[true,null,"s"],"o":{}}'));
    expect(canonicalJson(decoded)).toBe(canonicalJson({ n: 2.5, i: -3n, l: [true, null, 's'], o: {} }));
  });

  test('indented output for written files', () => {
    expect(canonicalJson({ b: [1n, 2n], a: {} }, 2)).toBe('{\n  "a": {},\n  "b": [\n    1,\n    2\n  ]\n}');
  });

  test('a non-finite number is a CanonicalError naming its path', () => {
    const decoded = decodeJson(enc('{"x":[1,1e400]}'));
    let err: unknown;
    try {
      canonicalJson(decoded);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CanonicalError);
    expect((err as CanonicalError).path).toBe('$.x[1]');
    expect((err as CanonicalError).message).toBe('non-finite number 1e400');
    expect(() => canonicalJson({ x: Number.NaN })).toThrow(CanonicalError);
    expect(new JsonObject()).toBeInstanceOf(JsonObject);
  });

  test('retried payloads compare by value: -0 equals 0, 1.0 equals 1, request_id ignored', () => {
    const jog = (request_id: string, velocity: number[]) => ({ schema: 's', operation: 'jog', request_id, session: 'x', generation: 1n, velocity }) as unknown as Request;
    expect(payloadKey(jog('a', [0, 1]))).toBe(payloadKey(jog('b', [-0, 1.0])));
    expect(payloadKey(jog('a', [0, 1]))).not.toBe(payloadKey(jog('a', [0, 1.5])));
  });
});

describe('readBoundedBody', () => {
  let server: Server;
  let port: number;
  let bound: BodyBound = { limit: 10, refuse: 'counted' };
  const results: Array<Buffer | 'too_large' | 'gone'> = [];
  let arrived: (() => void) | undefined;

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      void readBoundedBody(req, bound).then((r) => {
        results.push(r);
        arrived?.();
        res.end(typeof r === 'string' ? r : `ok:${r.length}`);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  /** Send `chunks` (with Content-Length `declared` when given), waiting `gapMs` between chunks; the reply text. */
  function send(chunks: string[], declared?: number, gapMs = 0): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: declared === undefined ? {} : { 'content-length': declared } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      void (async () => {
        for (const c of chunks) {
          req.write(c);
          if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
        }
        req.end();
      })();
    });
  }

  test('at the limit the body comes back whole; one byte more is too_large (every mode)', async () => {
    for (const refuse of ['declared', 'counted', 'end'] as const) {
      bound = { limit: 10, refuse };
      expect(await send(['0123456789'], 10), refuse).toBe('ok:10');
      expect(await send(['0123456789a'], 11), refuse).toBe('too_large');
      expect(await send(['01234', '56789'], undefined), refuse).toBe('ok:10');
      expect(await send(['01234', '56789', 'a'], undefined), refuse).toBe('too_large');
    }
  });

  /** Declare 20 bytes, send `sent` of them, and leave when the server has decided (or at once when `leave`). */
  async function partial(refuse: BodyBound['refuse'], sent: number, leave: boolean): Promise<Buffer | 'too_large' | 'gone'> {
    bound = { limit: 10, refuse };
    results.length = 0;
    const seen = new Promise<void>((r) => (arrived = r));
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'content-length': 20 } });
    req.on('error', () => {});
    req.flushHeaders();
    if (sent) req.write('x'.repeat(sent));
    if (leave) {
      // Let the bytes reach the server before the connection goes.
      await new Promise((r) => setTimeout(r, 50));
      req.destroy();
    }
    await seen;
    req.destroy();
    return results[0]!;
  }

  test("'declared' decides from Content-Length before any byte", async () => {
    expect(await partial('declared', 0, false)).toBe('too_large');
  });

  test("'counted' ignores Content-Length: gone with 5 of 20 bytes sent, too_large at the 11th byte", async () => {
    expect(await partial('counted', 5, true)).toBe('gone');
    expect(await partial('counted', 11, false)).toBe('too_large');
  });

  test("'end' decides only at the end of the body: 15 of 20 bytes and the client gone is gone", async () => {
    expect(await partial('end', 15, true)).toBe('gone');
  });

  test('a client that goes away before the end of its body is gone', async () => {
    bound = { limit: 100, refuse: 'counted' };
    results.length = 0;
    const seen = new Promise<void>((r) => (arrived = r));
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'content-length': 50 } });
    req.on('error', () => {});
    req.write('only ten b');
    await new Promise((r) => setTimeout(r, 30));
    req.destroy();
    await seen;
    expect(results).toEqual(['gone']);
  });
});
