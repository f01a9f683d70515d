// The transcript a failed test leaves (harness/evidence.ts): what the collector makes of the exchanges it
// saw, text cut, session tokens redacted, the oldest polls dropped first. The collector keeps bytes and makes
// the text when the transcript is taken; these pin that the transcript says what the exchanges were.

import { afterEach, expect, test } from 'vitest';
import { beginTest, leaveTest, type Collector } from './evidence.ts';
import { exchangeObservers, type ControlClient, type Exchange } from './clients/control.ts';

const client = {} as ControlClient;
const TOKEN = 'ab'.repeat(32);
const OTHER = 'cd'.repeat(32);
const json = { 'content-type': 'application/json' };
let open: Collector | undefined;

afterEach(() => {
  if (open) leaveTest(open);
  open = undefined;
});

function see(c: Collector, x: Partial<Exchange> & Pick<Exchange, 'method' | 'path'>): void {
  exchangeObservers.after!({ client, body: undefined, ms: 1, at: c.started, ...x });
}

test('requests and replies as text, cut at 1500 characters, the session tokens issued replaced, other replies by their size', () => {
  const c = (open = beginTest('transcript one'));
  const req = Buffer.from('{"schema":"svc.rt-control.request.v1","operation":"acquire"}');
  see(c, { method: 'POST', path: '/v1/control', body: req, reply: { status: 200, headers: json, body: Buffer.from(`{"session":"${TOKEN}","generation":"1"}`) }, ms: 1.234, at: c.started + 5.4 });
  // The caller reuses its buffer after the exchange: the transcript still shows what was sent.
  req.fill(0x20);
  const long = `{"operation":"renew","session":"${TOKEN}","pad":"${'x'.repeat(2000)}"}`;
  see(c, { method: 'POST', path: '/v1/control', body: long, reply: { status: 409, headers: { 'content-type': 'application/json; charset=utf-8' }, body: new TextEncoder().encode(`{"error":"control_session_stale","other":"${OTHER}"}`) } });
  see(c, { method: 'GET', path: '/v1/telemetry', reply: { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array(4096) } });
  see(c, { method: 'POST', path: '/v1/control', body: `{"session":"${TOKEN}"}`, error: new Error(`socket closed after ${TOKEN}`) });
  const t = c.transcript();
  expect(t.omitted).toBe(0);
  expect(t.exchanges).toEqual([
    { at_ms: 5, method: 'POST', path: '/v1/control', request: '{"schema":"svc.rt-control.request.v1","operation":"acquire"}', status: 200, reply: '{"session":"<session #1>","generation":"1"}', ms: 1.23 },
    { at_ms: 0, method: 'POST', path: '/v1/control', request: `${long.slice(0, 1500)}... (cut)`.replace(TOKEN, '<session #1>'), status: 409, reply: `{"error":"control_session_stale","other":"${OTHER}"}`, ms: 1 },
    { at_ms: 0, method: 'GET', path: '/v1/telemetry', request: '', status: 200, reply: '(4096 bytes of application/octet-stream)', ms: 1 },
    { at_ms: 0, method: 'POST', path: '/v1/control', request: '{"session":"<session #1>"}', error: 'socket closed after <session #1>', ms: 1 },
  ]);
});

test('past 80 exchanges the oldest poll goes first, then the oldest command; the count of those left out is kept', () => {
  const c = (open = beginTest('transcript two'));
  for (let i = 0; i < 3; i++) see(c, { method: 'GET', path: `/v1/status?i=${i}`, reply: { status: 200, headers: json, body: Buffer.from('{}') } });
  for (let i = 0; i < 82; i++) see(c, { method: 'POST', path: '/v1/control', body: `{"n":${i}}`, reply: { status: 200, headers: json, body: Buffer.from('{}') } });
  const t = c.transcript();
  expect(t.omitted).toBe(5);
  expect(t.exchanges).toHaveLength(80);
  // The three polls went first, then the two oldest commands.
  expect(t.exchanges.map((e) => e.request)).toEqual(Array.from({ length: 80 }, (_, i) => `{"n":${i + 2}}`));
});
