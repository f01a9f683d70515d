// The OLP deployment facts file (olp-facts.ts): every key checked loudly, own_planner among them (a loopback
// address the suites listen on and the server that calls it), never a silent default.

import { describe, expect, test } from 'vitest';
import { HarnessError } from '../errors.ts';
import { parseOlpFacts } from './olp-facts.ts';

const refused = (text: string): string => {
  try {
    parseOlpFacts(text, 'f.json');
  } catch (e) {
    expect(e).toBeInstanceOf(HarnessError);
    expect((e as HarnessError).code).toBe('HIL_ERR_TARGET_OPTION');
    return (e as Error).message;
  }
  throw new Error(`not refused: ${text}`);
};

describe('OLP facts file', () => {
  test('own_planner: a loopback listen address and the server that calls it, trailing slashes dropped', () => {
    const f = parseOlpFacts(JSON.stringify({ own_planner: { listen: '127.0.0.1:8797', olp_url: 'http://127.0.0.1:8798/' } }), 'f.json');
    expect(f.own_planner).toEqual({ listen: '127.0.0.1:8797', olp_url: 'http://127.0.0.1:8798' });
    for (const listen of ['localhost:1', '[::1]:65535']) expect(parseOlpFacts(JSON.stringify({ own_planner: { listen, olp_url: 'http://x' } }), 'f').own_planner?.listen).toBe(listen);
  });

  test('own_planner: another host, port 0 or past 65535, no port, a stray key or a missing URL is refused', () => {
    for (const listen of ['0.0.0.0:8797', '10.0.0.1:8797', '127.0.0.1:0', '127.0.0.1:65536', '127.0.0.1', '127.0.0.1:08797', 8797]) {
      expect(refused(JSON.stringify({ own_planner: { listen, olp_url: 'http://127.0.0.1:1' } }))).toMatch(/own_planner\.listen/);
    }
    expect(refused(JSON.stringify({ own_planner: { listen: '127.0.0.1:1', olp_url: 'ftp://x' } }))).toMatch(/own_planner\.olp_url/);
    expect(refused(JSON.stringify({ own_planner: { listen: '127.0.0.1:1' } }))).toMatch(/own_planner\.olp_url/);
    expect(refused(JSON.stringify({ own_planner: { listen: '127.0.0.1:1', olp_url: 'http://x', port: 1 } }))).toMatch(/unknown key port/);
    expect(refused(JSON.stringify({ own_planner: ['127.0.0.1:1'] }))).toMatch(/own_planner must be an object/);
  });

  test('an unknown top-level key is refused and the known ones are named', () => {
    expect(refused('{"own_planer":{}}')).toMatch(/unknown key own_planer \(known: .*own_planner/);
  });
});
