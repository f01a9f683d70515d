// The browser guard's rules one by one (sims/local-guard.ts; docs/profile.md "Local servers: browser
// guard"), on requests as the HTTP server hands them over: Host forms, the listen address (a name, an
// address, every interface), --allowed-host names, Origin and Sec-Fetch-Site by method, the body type.

import type { IncomingMessage } from 'node:http';
import { describe, expect, test } from 'vitest';
import { LocalGuard, splitHost, validAllowedHost } from './local-guard.ts';

const req = (method: string, headers: Record<string, string>): IncomingMessage => ({ method, headers }) as unknown as IncomingMessage;
const guard = (listen: string, extra: string[] = [], type?: string) => {
  const g = new LocalGuard(listen, extra, type);
  g.listening(8794);
  return g;
};
const label = (g: LocalGuard, method: string, headers: Record<string, string>) => g.check(req(method, headers))?.label;

describe('Host', () => {
  test('Host values split into name and port; malformed ones do not', () => {
    expect(splitHost('LocalHost:8794')).toEqual({ name: 'localhost', port: 8794 });
    expect(splitHost('[::1]:8794')).toEqual({ name: '[::1]', port: 8794 });
    expect(splitHost('[::1]')).toEqual({ name: '[::1]', port: undefined });
    for (const bad of ['', 'a:b:c', '::1:8794', 'x:0', 'x:65536', 'user@host:1', 'a/b', 'h:8794 ', '[zz]:1']) expect(splitHost(bad), bad).toBeUndefined();
  });

  test('a server on 127.0.0.1 answers the loopback names with its port only', () => {
    const g = guard('127.0.0.1');
    // An IPv6 loopback in any of its spellings is the same address ([::1] as a browser writes it).
    for (const h of ['127.0.0.1:8794', 'localhost:8794', '[::1]:8794', '[0:0:0:0:0:0:0:1]:8794', '[0000::0001]:8794']) expect(label(g, 'GET', { host: h }), h).toBeUndefined();
    expect(label(guard('[fd00:0:0:0::7]'), 'GET', { host: '[fd00::7]:8794' })).toBeUndefined();
    expect(label(guard('127.0.0.1', ['fd00::7']), 'GET', { host: '[FD00:0:0::7]:8794' })).toBeUndefined();
    expect(label(guard('127.0.0.1', ['fd00::7']), 'GET', { host: '[fd00::8]:8794' })).toBe('host_not_allowed');
    for (const h of ['127.0.0.1:8795', '127.0.0.1', 'evil.example:8794', '10.0.0.1:8794', '127.0.0.2:8794']) expect(label(g, 'GET', { host: h }), h).toBe('host_not_allowed');
    expect(label(g, 'GET', {})).toBe('host_not_allowed');
  });

  test('the listen address and --allowed-host names are answered; every interface also takes any address literal, never a name', () => {
    expect(label(guard('cell-7.lan'), 'GET', { host: 'cell-7.lan:8794' })).toBeUndefined();
    expect(label(guard('192.168.1.9'), 'GET', { host: '192.168.1.9:8794' })).toBeUndefined();
    expect(label(guard('192.168.1.9'), 'GET', { host: '192.168.1.10:8794' })).toBe('host_not_allowed');
    expect(label(guard('127.0.0.1', ['Pendant.Example']), 'GET', { host: 'pendant.example:8794' })).toBeUndefined();
    expect(label(guard('127.0.0.1', ['pendant.example']), 'GET', { host: 'pendant.example:8795' })).toBe('host_not_allowed');
    for (const any of ['0.0.0.0', '::', '[::]']) {
      expect(label(guard(any), 'GET', { host: '192.168.1.10:8794' }), any).toBeUndefined();
      expect(label(guard(any), 'GET', { host: '[fe80::1]:8794' }), any).toBeUndefined();
      expect(label(guard(any), 'GET', { host: 'evil.example:8794' }), any).toBe('host_not_allowed');
    }
  });

  test('--allowed-host takes a name or an address, nothing with a port, scheme or path', () => {
    for (const ok of ['cell-7.lan', 'localhost', '10.1.2.3', '[::1]', '::1', 'a-b.c']) expect(validAllowedHost(ok), ok).toBe(true);
    for (const bad of ['', 'cell:8794', 'http://x', 'a/b', '-a', 'a..b', '*.example']) expect(validAllowedHost(bad), bad).toBe(false);
  });
});

describe('state-changing requests', () => {
  const g = guard('127.0.0.1');
  const host = { host: '127.0.0.1:8794', 'content-type': 'application/json' };

  test('Origin and Sec-Fetch-Site are judged on every method but GET and HEAD', () => {
    for (const m of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      expect(label(g, m, { ...host, origin: 'http://evil.example' }), m).toBe('cross_site_request');
      expect(label(g, m, { ...host, 'sec-fetch-site': 'cross-site' }), m).toBe('cross_site_request');
      expect(label(g, m, { ...host, origin: 'http://localhost:8794', 'sec-fetch-site': 'same-origin' }), m).toBeUndefined();
    }
    for (const m of ['GET', 'HEAD']) expect(label(g, m, { host: host.host, origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' }), m).toBeUndefined();
    for (const o of ['http://127.0.0.1:8795', 'https://127.0.0.1:8794', 'null', 'http://127.0.0.1:8794/', 'http://127.0.0.1']) expect(label(g, 'POST', { ...host, origin: o }), o).toBe('cross_site_request');
    for (const s of ['same-site', 'cross-site', 'x']) expect(label(g, 'POST', { ...host, 'sec-fetch-site': s }), s).toBe('cross_site_request');
    for (const s of ['same-origin', 'none']) expect(label(g, 'POST', { ...host, 'sec-fetch-site': s }), s).toBeUndefined();
  });

  test('a body-carrying method names the body type; DELETE and OPTIONS need none', () => {
    expect(label(g, 'POST', { host: host.host })).toBe('unsupported_content_type');
    expect(label(g, 'PUT', { host: host.host, 'content-type': 'text/plain' })).toBe('unsupported_content_type');
    expect(label(g, 'POST', { host: host.host, 'content-type': 'APPLICATION/JSON ; charset=utf-8' })).toBeUndefined();
    expect(label(g, 'DELETE', { host: host.host })).toBeUndefined();
    const planner = guard('127.0.0.1', [], 'application/octet-stream');
    expect(label(planner, 'POST', { host: host.host, 'content-type': 'application/json' })).toBe('unsupported_content_type');
    expect(label(planner, 'POST', { host: host.host, 'content-type': 'application/octet-stream' })).toBeUndefined();
  });
});
