// The grant keeper's thread (harness/clients/keeper.ts): renewals of held grants sent from an event loop
// of their own, so that a test whose loop is busy (a large upload decoded, a property test, a GC pause)
// does not make its own grant expire. Plain JavaScript on purpose: a worker thread starts without the
// test runner's TypeScript transform. Every renewal is reported back with when it was due, sent and
// answered (epoch ms), so the harness can say whether a lost grant was the target's doing or the host's.

import { parentPort, workerData } from 'node:worker_threads';
import { Agent } from 'undici';
import { raiseThreadNice } from '../thread-nice.mjs';

// At the quiet files' priority whatever the worker that started it runs at (harness/thread-nice.mjs says why).
parentPort.postMessage({ priority: raiseThreadNice(workerData.nice) });

const agents = new Map();
const grants = new Map();
const now = () => performance.timeOrigin + performance.now();

// Renewals of one grant may be in flight together (document 1 part 3: renew is admitted whenever the fence
// is valid and the lease not expired, each admission moving the deadline to its own time plus lease_ms;
// nothing orders one renewal after another's answer), so each connection key gets as many connections as
// a grant may have renewals outstanding: a renewal queued behind a slow answer on one connection would
// leave late by the harness's own doing.
const CONNECTIONS = 8;

function agentFor(c) {
  const key = JSON.stringify(c);
  let a = agents.get(key);
  if (!a) {
    const t = c.https;
    a = new Agent({
      connect: t ? { cert: t.cert, key: t.key, ca: t.ca, ...(t.servername ? { servername: t.servername } : {}), minVersion: 'TLSv1.3' } : { socketPath: c.socketPath },
      connections: CONNECTIONS,
      keepAliveTimeout: 4_000,
    });
    agents.set(key, a);
  }
  return a;
}

/** Decodes a reply as undici's body.text() does (UTF-8, a leading byte order mark dropped). */
const UTF8 = new TextDecoder();

/**
 * POST `body` to ORIGIN/v1/control and collect the reply: undici's dispatch with a handler that gathers the
 * bytes, as harness/clients/exchange.ts does for the harness's other clients (request() builds a response
 * stream and an async resource for every reply). Rejects with undici's error (its `code`) when the exchange
 * fails before or during the reply; 1xx replies are skipped.
 */
function post(dispatcher, origin, body) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let status = 0;
    try {
      dispatcher.dispatch(
        { origin, path: '/v1/control', method: 'POST', body, headers: { 'content-type': 'application/json' } },
        {
          onConnect() {},
          onHeaders(statusCode) {
            if (statusCode >= 200) status = statusCode;
            return true;
          },
          onData(chunk) {
            chunks.push(chunk);
            return true;
          },
          onComplete() {
            resolve({ status, text: UTF8.decode(Buffer.concat(chunks)) });
          },
          onError: reject,
        },
      );
    } catch (e) {
      reject(e);
    }
  });
}

/**
 * Keep one grant: a renewal is sent at each due time (start + k * every) whether or not the earlier ones
 * were answered, up to `m.inFlight` outstanding (a renewal due while that many are outstanding leaves as
 * soon as one is answered, and its record says how late). Sending one at a time would lose a correct
 * stack's grant whenever a round trip on a loaded host reaches the lease less the period (a 500 ms lease
 * renewed every 100 ms is lost by round trips of about 400 ms). The first refusal ends the sending; the
 * renewals still outstanding are answered and reported.
 */
function add(m) {
  const g = { stopped: false, k: 0, timer: undefined, inFlight: new Set(), waiting: false };
  grants.set(m.id, g);
  const limit = Math.max(1, m.inFlight ?? 1);
  const dispatcher = agentFor(m.connection);
  // The origin as undici's request() took it from the URL (new URL(...).origin); an unreadable one fails
  // each renewal as a transport error, as it did there.
  const base = m.connection.https ? m.connection.https.origin : 'http://localhost';
  let origin;
  const body = `{"schema":${JSON.stringify(m.schema)},"operation":"renew","session":${JSON.stringify(m.session)},"generation":${m.generation}}`;
  const renew = async (due) => {
    const sent = now();
    let status = 0;
    let label = '';
    let error = '';
    try {
      origin ??= new URL(base).origin;
      const res = await post(dispatcher, origin, body);
      const text = res.text;
      status = res.status;
      if (status !== 200) {
        try {
          error = String(JSON.parse(text).error ?? '');
        } catch {
          error = text.slice(0, 200);
        }
        label = error.split(/[:\s]/)[0];
      }
    } catch (e) {
      error = String(e?.code ?? e?.message ?? e);
      label = 'transport';
    }
    // Reported even when the grant was removed meanwhile: a renewal that was sent is evidence of when
    // the grant's deadline moved (or of the refusal that ended it).
    parentPort.postMessage({ id: m.id, due, sent, answered: now(), status, label, error });
    if (status !== 200) stop(g);
  };
  const send = (due) => {
    const p = renew(due).finally(() => {
      g.inFlight.delete(p);
      if (g.stopped) {
        if (g.inFlight.size === 0) grants.delete(m.id);
        return;
      }
      // A renewal held back by the limit leaves now that one was answered.
      if (g.waiting) {
        g.waiting = false;
        fire();
      }
    });
    g.inFlight.add(p);
  };
  const fire = () => {
    if (g.stopped) return;
    if (g.inFlight.size >= limit) {
      g.waiting = true;
      return;
    }
    send(m.start + g.k * m.every);
    next();
  };
  const next = () => {
    if (g.stopped) return;
    g.k++;
    // Due times this thread slept through (a stalled host) are one renewal, not a burst of them.
    g.k = Math.max(g.k, Math.floor((now() - m.start) / m.every));
    const due = m.start + g.k * m.every;
    g.timer = setTimeout(fire, Math.max(0, due - now()));
  };
  next();
}

function stop(g) {
  g.stopped = true;
  g.waiting = false;
  clearTimeout(g.timer);
}

function remove(id) {
  const g = grants.get(id);
  if (!g) return;
  stop(g);
  if (g.inFlight.size === 0) grants.delete(id);
}

/** Answer once the renewals of `id` in flight (if any) have been answered and reported, so the records are whole. */
async function flush(id, token) {
  const g = grants.get(id);
  if (g) await Promise.allSettled([...g.inFlight]);
  parentPort.postMessage({ flushed: token });
}

parentPort.on('message', (m) => {
  if (m.op === 'add') add(m);
  else if (m.op === 'remove') remove(m.id);
  else if (m.op === 'flush') void flush(m.id, m.token);
});
