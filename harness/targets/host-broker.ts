// The run's stack hosts (stack-host.ts), kept by the run's main process and shared by its workers. The
// conformance project's global setup starts the broker (host-broker-setup.ts) and names its socket in
// HIL_HOST_BROKER for the workers; a worker asks for a session over the socket, one connection per session
// (stack-host.ts startBrokered), and the broker runs it in an idle host or a new one. So the run keeps as many
// hosts as it has sessions open at once, not two per worker.
//
// One JSON line per message (stack-host.ts BrokerRequest, BrokerReply):
//   start {args, env, own, nice, timeoutMs}  -> err {d} lines with the session's standard error, then
//                                               ready {ready}, exited {code} (it refused to start) or
//                                               failed {message} (no ready line in time; the host is killed)
//   stop                                     -> stopped, once the session has stopped (or its host is gone)
//   warm {count, env, nice, worker}          -> nothing: hosts started idle, `count` per asking worker
// A connection that closes while its session runs (the worker ended) has the session stopped. `env` is the
// worker's environment: a host is started with it and keyed by the stack command it names, and a session
// gets what changed in it since its host started (stack-host.ts sessionEnv), as with a worker's own hosts.
//
// The socket lives in a directory of its own, readable by this user only; the hosts' lifeline is their
// standard input from this process, so they end with the run.

import { appendFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HostPool, type BrokerReply, type BrokerRequest, type StackHost } from './stack-host.ts';

/** A host that serves no session is kept until the run ends: the run's pool never holds more than it once had open at once. */
const KEEP_ALL = Number.POSITIVE_INFINITY;

export interface HostBroker {
  /** The socket workers connect to (HIL_HOST_BROKER). */
  path: string;
  /** The hosts started and not let go of, idle or serving. */
  readonly hosts: number;
  /** Stop listening, end the sessions under way and stop every host. */
  close(): Promise<void>;
}

export async function startBroker(): Promise<HostBroker> {
  const dir = await mkdtemp(join(tmpdir(), 'hil-hosts-'));
  const path = join(dir, 'broker.sock');
  // A run that ends without its teardown (interrupted, or a process.exit) leaves no directory behind.
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  process.once('exit', removeDir);
  const pool = new HostPool(KEEP_ALL);
  /** Hosts warmed so far for each worker that asked (its pid): each worker's first files find theirs ready. */
  const warmed = new Map<number, number>();
  const sockets = new Set<Socket>();
  const server = createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    serve(sock, pool, warmed);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    path,
    get hosts() {
      return pool.size;
    },
    async close() {
      await new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      });
      pool.closeAll();
      process.off('exit', removeDir);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** One worker connection: a warm request, or one session from start to stop. */
function serve(sock: Socket, pool: HostPool, warmed: Map<number, number>): void {
  sock.setEncoding('utf8');
  sock.on('error', () => undefined); // a worker that went away: 'close' follows
  const send = (r: BrokerReply) => {
    if (!sock.destroyed) sock.write(`${JSON.stringify(r)}\n`);
  };
  let buf = '';
  let session: { host: StackHost; key: string; stopping?: Promise<void> } | undefined;
  let trace: { file: string; pid: number } | undefined;
  const stop = (): Promise<void> => {
    const s = session;
    if (!s) return Promise.resolve();
    return (s.stopping ??= s.host.stop().then(() => {
      if (trace) traceLine('end', trace);
      pool.giveBack(s.key, s.host);
    }));
  };
  const handle = async (m: BrokerRequest) => {
    if (m.t === 'warm') {
      const had = warmed.get(m.worker) ?? 0;
      if (had >= m.count) return;
      warmed.set(m.worker, m.count);
      pool.warm(pool.idleCount(m.env) + (m.count - had), m.env, m.nice);
      return;
    }
    if (m.t === 'stop') {
      await stop();
      send({ t: 'stopped' });
      return;
    }
    if (session) return send({ t: 'failed', message: 'one session per connection' });
    const taken = pool.take(m.env, m.nice);
    session = taken;
    let started: { ready: unknown } | { code: number };
    try {
      started = await taken.host.start(m.args, m.env, m.own, m.timeoutMs, (d) => send({ t: 'err', d }));
    } catch (e) {
      taken.host.kill();
      session = undefined;
      return send({ t: 'failed', message: (e as Error).message });
    }
    if ('code' in started) {
      session = undefined;
      pool.giveBack(taken.key, taken.host);
      return send({ t: 'exited', code: started.code });
    }
    if (m.trace && process.env.HIL_CPU_TRACE) {
      trace = { file: m.trace, pid: taken.host.pid };
      traceLine('begin', trace);
    }
    send({ t: 'ready', ready: started.ready });
  };
  // Messages of a connection are handled one after another (a stop waits for the start before it).
  let queue = Promise.resolve();
  sock.on('data', (d: string) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let m: BrokerRequest;
      try {
        m = JSON.parse(line) as BrokerRequest;
      } catch {
        sock.destroy();
        return;
      }
      queue = queue.then(() => handle(m)).catch(() => void sock.destroy());
    }
  });
  // The worker went away: whatever it had open is stopped once its start (if under way) has answered.
  sock.on('close', () => {
    queue = queue.then(() => stop()).catch(() => undefined);
  });
}

/**
 * A line of bench/cpu-classes.ts's trace for a host serving a file's session (HIL_CPU_TRACE), in the format
 * harness/evidence-setup.ts writes for a worker with its own kinds: the benchmark books the host's CPU to
 * that file meanwhile.
 */
function traceLine(kind: 'begin' | 'end', t: { file: string; pid: number }): void {
  try {
    appendFileSync(process.env.HIL_CPU_TRACE!, `host-${kind}\t${t.pid}\t${Date.now()}\t${t.file}\n`);
  } catch {
    /* a measurement aid only */
  }
}
