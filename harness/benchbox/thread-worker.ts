// The bench box's own thread (started by harness/benchbox/thread.ts through thread-entry.mjs): the client,
// its serial port and its heartbeat timer, and with `--bench sim` the simulated box, its mock port and its
// deliveries to the stack's test channel, all on an event loop that the test's thread cannot hold up. The
// box opens the E-stop chain when it hears no beat for its timeout (docs/benchbox.md "Protocol"): beats
// written from the test's thread came late whenever that thread was busy, and the chain opened mid-test.
//
// Everything the client records is sent to the test's thread as it happens: events, the heartbeats as they
// are written, lines that are not protocol, heartbeat failures. Times cross as epoch ms
// (performance.timeOrigin + performance.now()): each thread has a time origin of its own.

import { Agent, request } from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import { raiseThreadNice, type ThreadNiceTaken } from '../priority.ts';
import { BenchBoxClient, BenchBoxError, mockBinding, type BenchBoxOptions, type MockPortBinding } from './client.ts';
import { BenchBoxModel, serveOnMockPort, type ServedBox } from './simbox.ts';

/** What the thread opens (the `open` message): the port, and the simulated box beside the client. */
export interface OpenData {
  path: string;
  mock?: boolean;
  replyTimeoutMs?: number;
  /** The simulated box beside the client; its chain and power go to the stack's test channel when given. */
  sim?: { testChannel?: string; buttonPressed?: boolean };
}

/** What the thread starts with: the nice value it raises itself to (harness/priority.ts raiseThreadNice). */
export interface ThreadData {
  nice?: number;
}

/** The client's requests the test's thread may make. */
export type CallMethod = 'hello' | 'status' | 'relay' | 'power' | 'heartbeat' | 'setTimeoutMs' | 'outputs' | 'setInputs';

/** An error as it crosses threads; a BenchBoxError keeps its code and detail. */
export interface WireError {
  name: string;
  message: string;
  code?: string;
  detail?: Record<string, unknown>;
}

/** The simulated box's state as the test reads it. */
export interface SimBoxSnapshot {
  relay: 'open' | 'closed';
  power: 'on' | 'off';
  heartbeat: 'idle' | 'armed' | 'expired';
  chain: 'open' | 'closed';
  timeoutMs: number;
  inputs: number;
  buttonsClosed: boolean;
}

export type ToThread =
  | { op: 'open'; data: OpenData }
  | { op: 'call'; id: number; method: CallMethod; args: unknown[] }
  | { op: 'startHeartbeat'; ms: number }
  | { op: 'stopHeartbeat' }
  | { op: 'sync'; id: number }
  | { op: 'close'; id: number }
  | { op: 'sim'; id: number; what: 'model' }
  | { op: 'sim'; id: number; what: 'drain' }
  | { op: 'sim'; id: number; what: 'tick'; at: number }
  | { op: 'sim'; id: number; what: 'silent'; silent: boolean }
  | { op: 'crash' };

export type FromThread =
  | { priority: ThreadNiceTaken }
  | { opened: true }
  | { openFailed: WireError }
  | { reply: number; value?: unknown; error?: WireError }
  | { event: { event: string; fields: Record<string, string>; at: number } }
  | { beat: number }
  | { malformed: { line: string; why: string } }
  | { heartbeatError: WireError };

/** What the thread answers to `close`: the simulated box as it was left, and a delivery that failed. */
export interface Closed {
  model?: SimBoxSnapshot;
  injectError?: string;
}

const parent = parentPort!;
const post = (m: FromThread) => parent.postMessage(m);
const epoch = (ms: number) => performance.timeOrigin + ms;

function wire(e: unknown): WireError {
  const x = e as { name?: string; message?: string };
  if (e instanceof BenchBoxError) return { name: e.name, message: e.message, code: e.code, detail: e.detail };
  return { name: String(x?.name ?? 'Error'), message: String(x?.message ?? e) };
}

post({ priority: raiseThreadNice((workerData as ThreadData).nice ?? 0) });

/** Set by the `open` message; nothing else comes before it. */
let d: OpenData = { path: '(not opened)' };

let client: BenchBoxClient | undefined;
let served: ServedBox | undefined;
let model: BenchBoxModel | undefined;
let agent: Agent | undefined;
/** The simulated box's chain and power changes reach the stack in order (the cell is live only with both). */
let deliveries: Promise<void> = Promise.resolve();
let injectError: Error | undefined;

/**
 * POST one condition to the test channel's /inject and read the answer to its end. node:http, not undici:
 * the thread comes up while the stack starts, and undici alone took 230-700 ms of that to load on a loaded
 * host. As before the move, the answer's status is not judged: the stack reports the cell it then has.
 */
function postInject(a: Agent, socketPath: string, body: unknown): Promise<void> {
  const b = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, agent: a, path: '/inject', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': b.length } }, (res) => {
      res.on('error', reject);
      res.on('end', resolve);
      res.resume();
    });
    req.on('error', reject);
    req.end(b);
  });
}

function inject(body: unknown): Promise<void> {
  const a = agent;
  const socketPath = d.sim?.testChannel;
  if (!a || !socketPath) return Promise.resolve(); // a simulated box with no stack beside it (the thread's own tests)
  const next = deliveries.then(() => postInject(a, socketPath, body));
  // A failed delivery is kept for the target's settle (the sim `drain`); the deliveries go on.
  deliveries = next.catch((e: Error) => {
    injectError ??= e;
  });
  return next;
}

function snapshot(m: BenchBoxModel): SimBoxSnapshot {
  return { relay: m.relay, power: m.power, heartbeat: m.heartbeat, chain: m.chain, timeoutMs: m.timeoutMs, inputs: m.inputs, buttonsClosed: m.buttonsClosed };
}

async function open(): Promise<void> {
  const o: BenchBoxOptions = {
    path: d.path,
    ...(d.mock ? { mock: true } : {}),
    ...(d.replyTimeoutMs ? { replyTimeoutMs: d.replyTimeoutMs } : {}),
    onEvent: (e) => post({ event: { event: e.event, fields: e.fields, at: epoch(e.atMs) } }),
    onBeatWritten: (at) => post({ beat: epoch(at) }),
    onMalformed: (m) => post({ malformed: m }),
    onHeartbeatError: (e) => post({ heartbeatError: wire(e) }),
  };
  if (d.sim) {
    if (d.sim.testChannel) agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const m = new BenchBoxModel(performance.now(), { cell: (s) => inject(s.chainClosed && s.powerOn ? { kind: 'clear' } : { kind: 'estop_open' }) });
    model = m;
    m.buttonsClosed = !d.sim.buttonPressed;
    (await mockBinding()).createPort(d.path, { echo: false, record: false });
    m.boot(performance.now()); // the box has just powered up: chain open, power off
    await inject({ kind: 'estop_open' });
    o.mock = true;
    o.attach = (p) => (served = serveOnMockPort(p as MockPortBinding, m));
  }
  client = await BenchBoxClient.open(o);
}

function answer(id: number, work: () => unknown): void {
  Promise.resolve()
    .then(work)
    .then(
      (value) => post({ reply: id, value }),
      (e: unknown) => post({ reply: id, error: wire(e) }),
    );
}

function noClient(): never {
  throw new BenchBoxError('BENCH_CLOSED', `the bench box port ${d.path} is closed`);
}

function sim(): BenchBoxModel {
  if (!model) throw new Error('no simulated bench box in this thread');
  return model;
}

async function close(): Promise<Closed> {
  client?.stopHeartbeat();
  await client?.close();
  served?.stop();
  await deliveries;
  agent?.destroy();
  return { ...(model ? { model: snapshot(model) } : {}), ...(injectError ? { injectError: injectError.message } : {}) };
}

async function opening(data: OpenData): Promise<void> {
  d = data;
  try {
    await open();
    post({ opened: true });
  } catch (e) {
    post({ openFailed: wire(e) });
    served?.stop();
    agent?.destroy();
  }
}

parent.on('message', (m: ToThread) => {
  switch (m.op) {
    case 'open':
      void opening(m.data);
      return;
    case 'call':
      answer(m.id, () => {
        const c = client ?? noClient();
        return (c[m.method] as (...a: unknown[]) => Promise<unknown>).apply(c, m.args);
      });
      return;
    case 'startHeartbeat':
      if (client) client.startHeartbeat(m.ms);
      else post({ heartbeatError: wire(new BenchBoxError('BENCH_CLOSED', `the bench box port ${d.path} is closed`)) });
      return;
    case 'stopHeartbeat':
      client?.stopHeartbeat();
      return;
    case 'sync':
      post({ reply: m.id });
      return;
    case 'close':
      answer(m.id, close);
      return;
    case 'crash':
      // A thread that dies (its tests): what the test's thread does then is what matters.
      setImmediate(() => {
        throw new Error('the bench box thread was made to fail');
      });
      return;
    case 'sim':
      answer(m.id, async () => {
        const box = sim();
        if (m.what === 'model') return snapshot(box);
        if (m.what === 'drain') {
          await deliveries;
          return injectError?.message;
        }
        if (m.what === 'silent') {
          if (served) served.silent = m.silent;
          return undefined;
        }
        // The box's watchdog run at a time of the test's choosing; what it says goes to the host.
        const lines = box.tick(m.at - performance.timeOrigin);
        const port = client?.bindingPort as MockPortBinding | undefined;
        if (lines.length && port?.isOpen) port.emitData(lines.join(''));
        return lines;
      });
      return;
  }
});
