// A faithful fake of node-ethercat's master (the EthercatMaster adapter interface) over simulated CiA 402
// drives. What it keeps from the real thing: slaves added with node-ethercat's definitions and checks (same
// error texts), pins named `<slave id>.<entry>` whose offsets are unknown (-1) until start() registers the
// domain, the 8/16/32-bit pin types written the way EC_WRITE_* does (low bits kept: an out-of-range value
// wraps, and the fake counts it so a test can show the driver never does that), start() running each slave's
// SDO start-up list and stopping at the first refusal, SDO downloads a slave refuses with a CoE abort code,
// a slave whose identity differs from its configuration staying in PREOP, and its own cycle: in thread mode a
// worker runs the bus at the configured period over a shared domain, not synchronised with the core's cycle,
// as node-ethercat's SCHED_FIFO thread does. Lockstep mode runs one bus cycle per driver exchange (`sync`),
// for the stepped and fast clocks, where core time is not wall time.
//
// Out of band (`inject`): link down, slave lost, working-counter drop, a stale cycle (the master stops
// cycling), AL state changes, and every drive fault of the shared vocabulary (passed to the drives).

import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { AL } from '../bus.ts';
import { FakeBus, readDomain, ST, statusBytes, writeDomain, type DomainPin, type FakeBusSpec, type FakeFault } from './fake-bus.ts';
import { mappingWord, RX_PDO, TX_PDO } from './layout.ts';
import { bornAtNormalScheduling, lowerThread } from '../thread-scheduling.ts';
import {
  abortText,
  PIN_BITS,
  PIN_RANGE,
  parseIndex,
  type Callback,
  type DomainState,
  type EthercatMaster,
  type FoundSlave,
  type MasterState,
  type PinInfo,
  type PinType,
  type SdoParams,
  type SlaveOptions,
} from './master.ts';


// The fake's cycle thread: a shim that registers the TypeScript loader when run from source, or the sibling
// bundle in a prebuilt stack (harness/targets/reference.ts defines HIL_PREBUILT; sims/paths.ts does the
// same for the stack's own workers).
declare const HIL_PREBUILT: { root: string } | undefined;
const FAKE_WORKER = typeof HIL_PREBUILT === 'undefined' ? new URL('./fake-worker-entry.mjs', import.meta.url) : new URL('./ethercat-fake-worker.js', import.meta.url);

export type FakeCycleMode = 'thread' | 'lockstep';

export interface FakeMasterOptions {
  mode: FakeCycleMode;
  bench: FakeBusSpec;
  /** The master cannot be reached (no IgH master running): start() fails as node-ethercat's does. */
  noMaster?: boolean;
}

/** What the cycle thread says of its scheduling (fake-worker.ts, drivers/thread-scheduling.ts): as it was born, while it set the bus up, while it cycled, and as it ended. */
export interface CycleThreadScheduling {
  born?: string;
  setup?: string;
  cycling?: string;
  stopped?: string;
}

/** The cycle thread's messages to the master. */
export interface CycleThreadReport {
  t: 'running' | 'stopped';
  scheduling: CycleThreadScheduling;
  /** The thread's id as the kernel knows it (with 'running'). */
  tid?: string;
}

/** How long close() lets the cycle thread end by itself before terminating it. */
const STOP_GRACE_MS = 2000;

interface Registered {
  options: SlaveOptions;
  index: number;
}

const TYPES: readonly PinType[] = ['uint8', 'int8', 'uint16', 'int16', 'uint32', 'int32'];

export class FakeEthercatMaster implements EthercatMaster {
  readonly label: string;
  private readonly slaves: Registered[] = [];
  private readonly pins: Record<string, PinInfo> = {};
  private readonly pinList: PinInfo[] = [];
  private started = false;
  private active = false;
  private domain?: SharedArrayBuffer;
  private view?: DataView;
  private readonly status: SharedArrayBuffer;
  private readonly st: Int32Array;
  /** SDO values downloaded per slave position ("index:subindex" -> value). */
  readonly od = new Map<number, Map<string, number>>();
  /** Writes whose value did not fit the pin's type (EC_WRITE_* kept the low bits). */
  readonly outOfRangeWrites: Array<{ name: string; value: number }> = [];
  private bus?: FakeBus;
  private worker?: Worker;
  /** The cycle thread's kernel thread id, once it runs. */
  private cycleThreadId?: string;
  /** Resolves when the cycle thread has exited (taken at its start: it may end before close() asks). */
  private workerExit?: Promise<void>;
  private port?: MessagePort;
  /** Thread mode: the cycle thread's scheduling as it reported it (for tests, and for a look at a run). */
  readonly cycleThread: CycleThreadScheduling = {};
  /** Present only in lockstep mode: the driver runs one bus cycle per exchange. */
  sync?: (nowNs: bigint) => void;

  constructor(readonly options: FakeMasterOptions) {
    this.label = `fake master (${options.mode}, simulated CiA 402 drives)`;
    const b = options.bench;
    this.status = new SharedArrayBuffer(statusBytes(b.slaves.length, b.plant.axes.length));
    this.st = new Int32Array(this.status, 0, ST.header + b.slaves.length);
    this.st[ST.link] = 1;
    // Before activation every slave on the wire answers in INIT.
    let responding = 0;
    b.slaves.forEach((_s, k) => {
      this.st[ST.header + k] = AL.init;
      responding++;
    });
    this.st[ST.responding] = responding;
    this.st[ST.alOr] = responding ? AL.init : 0;
    if (options.mode === 'lockstep') this.sync = (nowNs) => this.bus?.cycle(nowNs);
  }

  // --- node-ethercat's API ---------------------------------------------------------------------------------

  addSlave(options: SlaveOptions, cb: Callback<{ index: number }>): void {
    if (!options) return cb({ result: 'error', error: 'Please provide slave data' });
    const id = options.id;
    if (!id) return cb({ result: 'error', error: 'Please provide slave id' });
    // node-ethercat 1.0.5 means to refuse a duplicate id but tests `getSlave[id]` (a function's property),
    // so it never does; the fake refuses it, as the author intended.
    if (this.slaves.some((s) => s.options.id === id)) return cb({ result: 'error', error: 'Duplicate slave. Please provide unique slave names' });
    const d = options.definition;
    if (options.position?.alias === undefined || options.position.index === undefined || d?.id?.vendor === undefined || d.id.product === undefined || d.syncs === undefined) {
      return cb({ result: 'error', error: 'Wrong definition for slave. Please check parameters' });
    }
    if (this.started) return cb({ result: 'error', error: 'Already started' });
    const added: PinInfo[] = [];
    for (const sync of d.syncs) {
      if (sync.syncManager === undefined) return cb({ result: 'error', error: 'Wrong sync definition for slave. Please specify syncManager index' });
      if (sync.direction !== 'input' && sync.direction !== 'output') return cb({ result: 'error', error: 'direction in sync must either be input or output' });
      if (sync.watchdog !== 'enable' && sync.watchdog !== 'disable') return cb({ result: 'error', error: 'watchdog in sync must either be disable or enable' });
      if (!sync.pdos?.length) return cb({ result: 'error', error: 'Please specify pdo list for sync ' });
      for (const pdo of sync.pdos) {
        if (!pdo) return cb({ result: 'error', error: 'wrong pdo format' });
        if (pdo.index === undefined) return cb({ result: 'error', error: 'Expecting index in pdo object' });
        if (!pdo.entries?.length) return cb({ result: 'error', error: 'Please provide entries array' });
        for (const e of pdo.entries) {
          if (!e.name || !e.type) return cb({ result: 'error', error: 'wrong entry format' });
          if (!TYPES.includes(e.type)) return cb({ result: 'error', error: `Unknown pdo type: ${String(e.type)}` });
          const name = `${id}.${e.name}`;
          if (this.pins[name] || added.some((p) => p.name === name)) return cb({ result: 'error', error: `Cannot add pin ${name}. Probably duplicated ` });
          added.push({ name, offset: -1, size: PIN_BITS[e.type], type: e.type, slaveId: id, index: e.index, subindex: e.subindex });
        }
      }
    }
    for (const p of added) {
      this.pins[p.name] = p;
      this.pinList.push(p);
    }
    const index = this.slaves.length;
    this.slaves.push({ options, index });
    cb({ result: 'ok', data: { index } });
  }

  start(_options: Record<string, unknown>, cb: Callback): void {
    if (this.started) return cb({ result: 'error', error: 'Already started' });
    if (this.options.noMaster) return cb({ result: 'error', error: 'Cannot retrieve master. Is ethercat running and are you root?' });
    // Domain registration: each slave's output entries, then its input entries, in the order slaves were
    // added; a pin's offset is its byte offset in the domain.
    let offset = 0;
    for (const s of this.slaves) {
      for (const dir of ['output', 'input'] as const) {
        for (const sync of s.options.definition.syncs.filter((x) => x.direction === dir)) {
          for (const pdo of sync.pdos) {
            for (const e of pdo.entries) {
              const p = this.pins[`${s.options.id}.${e.name}`]!;
              p.offset = offset;
              offset += p.size / 8;
            }
          }
        }
      }
    }
    this.domain = new SharedArrayBuffer(Math.max(1, offset));
    this.view = new DataView(this.domain);
    this.started = true;
    // node-ethercat then runs every slave's `config` list, stopping at the first refusal.
    const lists = this.slaves.flatMap((s) => (s.options.config ?? []).map((c) => ({ slaveId: s.options.id, ...c.params })));
    const next = (k: number): void => {
      if (k >= lists.length) return cb({ result: 'ok', data: {} });
      this.configSdo(lists[k]!, (res) => (res.result === 'error' ? cb(res) : next(k + 1)));
    };
    next(0);
  }

  activate(_options: Record<string, unknown>, cb: Callback): void {
    if (this.active) return cb({ result: 'error', error: 'Ehtercat already active' });
    if (!this.started || !this.domain) return cb({ result: 'error', error: 'Could not retrieve domain data' });
    this.active = true;
    const bench = this.options.bench;
    // A configured slave whose identity matches reaches OP; a mismatched one stays in PREOP (IgH does not
    // configure it); a slave on the wire that nobody configured stays in PREOP too; an absent one is absent.
    const reached = bench.slaves.map((phys) => {
      const conf = this.slaves.find((s) => s.options.position.index === phys.position);
      if (!conf) return AL.preop;
      const id = conf.options.definition.id;
      return parseIndex(id.vendor) === phys.vendor && parseIndex(id.product) === phys.product ? AL.op : AL.preop;
    });
    const pins: DomainPin[] = [];
    for (const s of this.slaves) {
      for (const sync of s.options.definition.syncs) {
        for (const pdo of sync.pdos) {
          for (const e of pdo.entries) {
            const p = this.pins[`${s.options.id}.${e.name}`]!;
            pins.push({ name: p.name, offset: p.offset, type: p.type, position: s.options.position.index, entry: e.name, dir: sync.direction === 'output' ? 'rx' : 'tx' });
          }
        }
      }
    }
    if (this.options.mode === 'lockstep') {
      this.bus = new FakeBus(bench, pins, this.domain, this.status, reached);
      void this.bus.ready().then(() => cb({ result: 'ok', data: {} }));
      return;
    }
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    // Made by the core's thread, at SCHED_FIFO 40 on the real-time clock: the new thread would inherit that
    // for its start-up (drivers/thread-scheduling.ts says what that cost); it is born at normal scheduling instead.
    const worker = bornAtNormalScheduling(
      () =>
        new Worker(FAKE_WORKER, {
          workerData: { bench, pins, domain: this.domain, status: this.status, reached, port: port2 },
          transferList: [port2],
        }),
    );
    this.worker = worker;
    this.workerExit = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.unref();
    const onError = (e: Error) => cb({ result: 'error', error: `fake master cycle thread failed: ${e.message}` });
    worker.once('error', onError);
    worker.on('message', (m: CycleThreadReport) => {
      Object.assign(this.cycleThread, m.scheduling);
      if (m.tid) this.cycleThreadId = m.tid;
    });
    worker.once('message', (m: CycleThreadReport) => {
      worker.off('error', onError);
      worker.on('error', (e) => process.emitWarning(`fake master cycle thread failed: ${e.message}`));
      if (m.t === 'running') cb({ result: 'ok', data: {} });
    });
  }

  configSdo(o: SdoParams & { slaveId: string }, cb: Callback): void {
    const s = this.slaves.find((x) => x.options.id === o.slaveId);
    if (!s) return cb({ result: 'error', error: `Cannot find slave with Id${o.slaveId}` });
    if (typeof o.value !== 'number' || Number.isNaN(o.value)) return cb({ result: 'error', error: 'Please supply valid value' });
    if (!TYPES.includes(o.type)) return cb({ result: 'error', error: 'Please specify sdo type' });
    if (this.active) return cb({ result: 'error', error: 'SDO start-up list is closed: the master is active' });
    const pos = s.options.position.index;
    const phys = this.options.bench.slaves.find((x) => x.position === pos);
    const abort = (code: number) => cb({ result: 'error', error: `${abortText(code)} slave ${pos} ${hex4(o.index)}:${o.subindex.toString(16).padStart(2, '0')}`, abortCode: code });
    if (!phys) return abort(0x05040000);
    const refusal = phys.sdoAborts?.find((a) => a.index === o.index && a.subindex === o.subindex);
    if (refusal) return abort(refusal.abortCode);
    const [lo, hi] = PIN_RANGE[o.type];
    if (!Number.isInteger(o.value)) return abort(0x06070010);
    if (o.value > hi) return abort(0x06090031);
    if (o.value < lo) return abort(0x06090032);
    let od = this.od.get(pos);
    if (!od) this.od.set(pos, (od = new Map()));
    od.set(`${o.index}:${o.subindex}`, o.value);
    cb({ result: 'ok', data: {} });
  }

  readPin(name: string): number | undefined {
    const p = this.pins[name];
    if (!p || p.offset === -1 || !this.view) return undefined;
    return readDomain(this.view, p.offset, p.type);
  }

  writePin(name: string, value: number): void {
    const p = this.pins[name];
    if (!p || p.offset === -1 || !this.view) return;
    if (value === undefined) throw 'writePin please provide value';
    const [lo, hi] = PIN_RANGE[p.type];
    if (!Number.isInteger(value) || value < lo || value > hi) this.outOfRangeWrites.push({ name, value });
    writeDomain(this.view, p.offset, p.type, Math.trunc(value));
  }

  getPins(): Record<string, PinInfo> {
    return this.pins;
  }

  getMasterState(): MasterState {
    return { slaves_responding: Atomics.load(this.st, ST.responding), al_states: Atomics.load(this.st, ST.alOr), link_up: Atomics.load(this.st, ST.link) };
  }

  // --- beyond node-ethercat ---------------------------------------------------------------------------------

  uploadSdo(o: { slaveId: string; index: number; subindex: number }, cb: Callback<{ value: number }>): void {
    const s = this.slaves.find((x) => x.options.id === o.slaveId);
    if (!s) return cb({ result: 'error', error: `Cannot find slave with Id${o.slaveId}` });
    const phys = this.options.bench.slaves.find((x) => x.position === s.options.position.index);
    const abort = (code: number) => cb({ result: 'error', error: abortText(code), abortCode: code });
    if (!phys || this.alAt(phys.position) === 0) return abort(0x05040000);
    const rx = phys.mapping.filter((e) => e.dir === 'rx');
    const tx = phys.mapping.filter((e) => e.dir === 'tx');
    const ok = (value: number) => cb({ result: 'ok', data: { value } });
    // What the master wrote by SDO (explicit PDO configuration) replaces the firmware's default mapping.
    const written = this.od.get(phys.position)?.get(`${o.index}:${o.subindex}`);
    if (written !== undefined && [0x1c12, 0x1c13, RX_PDO, TX_PDO].includes(o.index)) return ok(written);
    const table = (list: typeof rx) => (o.subindex === 0 ? ok(list.length) : o.subindex <= list.length ? ok(mappingWord(list[o.subindex - 1]!)) : abort(0x06090011));
    switch (o.index) {
      case 0x1c12:
        return o.subindex === 0 ? ok(1) : o.subindex === 1 ? ok(RX_PDO) : abort(0x06090011);
      case 0x1c13:
        return o.subindex === 0 ? ok(1) : o.subindex === 1 ? ok(TX_PDO) : abort(0x06090011);
      case RX_PDO:
        return table(rx);
      case TX_PDO:
        return table(tx);
      default: {
        const v = this.od.get(phys.position)?.get(`${o.index}:${o.subindex}`);
        return v === undefined ? abort(0x06020000) : ok(v);
      }
    }
  }

  scanSlaves(): FoundSlave[] {
    return this.options.bench.slaves.map((s) => {
      const al = this.alAt(s.position);
      return { position: s.position, vendor: s.vendor, product: s.product, alState: al, online: al !== 0 };
    });
  }

  /** AL state of the slave at a bus position; 0 when nothing answers there. */
  slaveAlState(position: number): number {
    const k = this.options.bench.slaves.findIndex((s) => s.position === position);
    return k < 0 ? 0 : Atomics.load(this.st, ST.header + k);
  }

  private alAt(position: number): number {
    return this.slaveAlState(position);
  }

  cycleCounter(): number {
    return Atomics.load(this.st, ST.counter);
  }

  domainState(): DomainState {
    return { workingCounter: Atomics.load(this.st, ST.wkc), expected: Atomics.load(this.st, ST.wkcExpected) };
  }

  /** Drive counters as the bus last reported them (what a restarted master finds on real drives). */
  driveCounters(): { counts: number[]; absoluteBias: number[] } {
    const b = this.options.bench;
    const off = Math.ceil(((ST.header + b.slaves.length) * 4) / 8) * 8;
    const kept = new Float64Array(this.status, off, b.plant.axes.length * 2);
    const counts: number[] = [];
    const absoluteBias: number[] = [];
    for (let a = 0; a < b.plant.axes.length; a++) {
      counts.push(kept[2 * a]!);
      absoluteBias.push(kept[2 * a + 1]!);
    }
    return { counts, absoluteBias };
  }

  /** Out-of-band bus and drive conditions (see FakeFault). Thread mode: applied at the next bus cycle. */
  inject(f: FakeFault): void {
    if (f.kind === 'slave_lost' || f.kind === 'al_state') {
      if (!this.options.bench.slaves.some((s) => s.position === f.position)) throw new RangeError(`no slave at position ${f.position}`);
    }
    if (this.bus) this.bus.apply(f);
    else if (this.port) this.port.postMessage(f);
    else throw new Error('the fake master is not active');
  }

  async close(): Promise<void> {
    const worker = this.worker;
    if (worker) {
      this.worker = undefined;
      // Back to normal scheduling before it is told to stop, so that its last cycles, its exit, the isolate's
      // teardown and the freeing of its heap do not run at SCHED_FIFO 49, above the core's thread and every
      // harness thread (the defect sims/core/host.ts lowerThreadPriority tells of, for the core's own thread).
      // Lowered from here, not by itself (drivers/thread-scheduling.ts lowerThread says why); should that fail, the
      // thread gives it back itself (fake-worker.ts end). Then it ends by itself: terminating it at once
      // would stop it wherever it is. Terminated only when it has not ended within the grace (a thread that
      // stopped draining).
      if (this.cycleThreadId && /^SCHED_(FIFO|RR)/.test(this.cycleThread.cycling ?? '')) lowerThread(this.cycleThreadId);
      this.port?.postMessage({ kind: 'stop' });
      const timer = setTimeout(() => {
        process.emitWarning(`fake master cycle thread did not end within ${STOP_GRACE_MS} ms of its stop: terminated at its scheduling (${this.cycleThread.cycling ?? 'unknown'})`);
        void worker.terminate();
      }, STOP_GRACE_MS);
      await this.workerExit;
      clearTimeout(timer);
      this.port?.close();
      this.port = undefined;
    }
    await this.bus?.close();
    this.bus = undefined;
  }
}

function hex4(v: number): string {
  return `0x${v.toString(16).padStart(4, '0')}`;
}
