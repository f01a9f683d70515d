// The grant keeper's thread (harness/clients/keeper.ts): renewals of held grants sent from an event loop
// of their own, so that a test whose loop is busy (a large upload decoded, a property test, a GC pause)
// does not make its own grant expire. Plain JavaScript on purpose: a worker thread starts without the
// test runner's TypeScript transform. Every renewal is reported back with when it was due, sent and
// answered (epoch ms), so the harness can say whether a lost grant was the target's doing or the host's.

import { parentPort } from 'node:worker_threads';
import { Agent, request } from 'undici';

const agents = new Map();
const grants = new Map();
const now = () => performance.timeOrigin + performance.now();

function agentFor(c) {
  const key = JSON.stringify(c);
  let a = agents.get(key);
  if (!a) {
    const t = c.https;
    a = new Agent({
      connect: t ? { cert: t.cert, key: t.key, ca: t.ca, ...(t.servername ? { servername: t.servername } : {}), minVersion: 'TLSv1.3' } : { socketPath: c.socketPath },
      connections: 1,
      keepAliveTimeout: 4_000,
    });
    agents.set(key, a);
  }
  return a;
}

function add(m) {
  const g = { stopped: false, k: 0, timer: undefined, inFlight: undefined };
  grants.set(m.id, g);
  const dispatcher = agentFor(m.connection);
  const origin = m.connection.https ? m.connection.https.origin.replace(/\/$/, '') : 'http://localhost';
  const body = `{"schema":${JSON.stringify(m.schema)},"operation":"renew","session":${JSON.stringify(m.session)},"generation":${m.generation}}`;
  const next = () => {
    if (g.stopped) return;
    g.k++;
    const due = m.start + g.k * m.every;
    g.timer = setTimeout(() => {
      if (g.stopped) return;
      g.inFlight = renew().finally(() => (g.inFlight = undefined));
    }, Math.max(0, due - now()));
    const renew = async () => {
      const sent = now();
      let status = 0;
      let label = '';
      let error = '';
      try {
        const res = await request(`${origin}/v1/control`, { method: 'POST', dispatcher, body, headers: { 'content-type': 'application/json' } });
        const text = await res.body.text();
        status = res.statusCode;
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
      if (g.stopped) return;
      if (status !== 200) {
        g.stopped = true;
        return;
      }
      next();
    };
  };
  next();
}

function remove(id) {
  const g = grants.get(id);
  if (!g) return;
  g.stopped = true;
  clearTimeout(g.timer);
  if (!g.inFlight) grants.delete(id);
  else void g.inFlight.then(() => grants.delete(id));
}

/** Answer once the renewal of `id` in flight (if any) has been answered and reported, so the records are whole. */
async function flush(id, token) {
  await grants.get(id)?.inFlight;
  parentPort.postMessage({ flushed: token });
}

parentPort.on('message', (m) => {
  if (m.op === 'add') add(m);
  else if (m.op === 'remove') remove(m.id);
  else if (m.op === 'flush') void flush(m.id, m.token);
});
