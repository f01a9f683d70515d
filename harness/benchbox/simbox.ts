// A simulated bench box: the box side of the line protocol (docs/benchbox.md) as a state machine with the
// time given to it, and a way to serve it on a @serialport/binding-mock port. Its effects on the cell (the
// E-stop chain, drive power, the cell inputs it drives) go to a callback: on the sim target they become
// test-channel faults, so the suites that run on a rig with the real box run unchanged on the simulator.

import { parseRequest, PROTOCOL_VERSION, hex16, type Request } from './protocol.ts';

export interface BoxEffects {
  /** The E-stop chain or drive power changed: `live` is chain closed and power on. */
  cell?(state: { chainClosed: boolean; powerOn: boolean }): void | Promise<void>;
  /** The cell inputs the box drives changed. */
  inputs?(value: number): void | Promise<void>;
  /** The cell outputs as wired back to the box (readback). */
  outputs?(): number;
}

export class BenchBoxModel {
  relay: 'open' | 'closed' = 'open';
  power: 'on' | 'off' = 'off';
  heartbeat: 'idle' | 'armed' | 'expired' = 'idle';
  timeoutMs = 500;
  inputs = 0;
  /** The E-stop buttons in series with the relay (a person pressing one opens the chain). */
  buttonsClosed = true;
  private lastBeatMs = 0;
  private bootMs: number;
  /** Lines that arrived but were no request (no id): the box ignores them. */
  ignored = 0;

  constructor(
    nowMs: number,
    private readonly effects: BoxEffects = {},
    readonly firmware = 'sim-1.0',
  ) {
    this.bootMs = nowMs;
  }

  get chain(): 'closed' | 'open' {
    return this.relay === 'closed' && this.buttonsClosed ? 'closed' : 'open';
  }

  /** What the box sends when it (re)starts; every state back to safe: relay open, power off, no heartbeat. */
  boot(nowMs: number): string[] {
    this.relay = 'open';
    this.power = 'off';
    this.heartbeat = 'idle';
    this.inputs = 0;
    this.bootMs = nowMs;
    void this.effects.cell?.({ chainClosed: false, powerOn: false });
    return [`* BOOT proto=${PROTOCOL_VERSION} fw=${this.firmware} timeout_ms=${this.timeoutMs}\n`];
  }

  /** Heartbeat watchdog: a host silent for timeoutMs opens the relay (and with it the chain) and cuts power. */
  tick(nowMs: number): string[] {
    if (this.heartbeat !== 'armed' || nowMs - this.lastBeatMs <= this.timeoutMs) return [];
    this.heartbeat = 'expired';
    const wasClosed = this.relay === 'closed';
    this.relay = 'open';
    this.power = 'off';
    void this.effects.cell?.({ chainClosed: false, powerOn: false });
    return [`* ESTOP chain=open reason=heartbeat_timeout relay=${wasClosed ? 'opened' : 'open'}\n`];
  }

  /** One request line (without its newline); returns the lines to send. */
  handle(line: string, nowMs: number): string[] {
    const out = this.tick(nowMs);
    const p = parseRequest(line);
    if (!p) {
      this.ignored++;
      return out;
    }
    if ('code' in p) return [...out, `${p.id} ERR ${p.code} ${p.text}\n`];
    return [...out, this.apply(p.id, p.req, nowMs)];
  }

  private status(nowMs: number): string {
    const outputs = this.effects.outputs?.() ?? 0;
    return `chain=${this.chain} relay=${this.relay} power=${this.power} hb=${this.heartbeat} timeout_ms=${this.timeoutMs} outputs=${hex16(outputs & 0xffff)} inputs=${hex16(this.inputs)} uptime_ms=${Math.max(0, Math.floor(nowMs - this.bootMs))}`;
  }

  private apply(id: number, r: Request, nowMs: number): string {
    const ok = (fields: string) => `${id} OK${fields ? ` ${fields}` : ''}\n`;
    switch (r.verb) {
      case 'HELLO':
        return ok(`proto=${PROTOCOL_VERSION} fw=${this.firmware} timeout_ms=${this.timeoutMs}`);
      case 'STATUS':
        return ok(this.status(nowMs));
      case 'RELAY':
        if (r.state === 'CLOSE') {
          // A closed chain needs a live host: the relay closes only while the heartbeat is armed.
          if (this.heartbeat !== 'armed') return `${id} ERR hb_not_armed send HB first\n`;
          this.relay = 'closed';
        } else {
          this.relay = 'open';
          this.power = 'off';
        }
        void this.effects.cell?.({ chainClosed: this.chain === 'closed', powerOn: this.power === 'on' });
        return ok(`relay=${this.relay} chain=${this.chain}`);
      case 'POWER':
        if (r.state === 'RESTORE') {
          if (this.chain !== 'closed') return `${id} ERR power_with_chain_open close the E-stop chain first\n`;
          this.power = 'on';
        } else this.power = 'off';
        void this.effects.cell?.({ chainClosed: this.chain === 'closed', powerOn: this.power === 'on' });
        return ok(`power=${this.power}`);
      case 'OUTPUTS':
        return ok(`outputs=${hex16((this.effects.outputs?.() ?? 0) & 0xffff)}`);
      case 'INPUTS':
        this.inputs = (this.inputs & ~r.mask) | (r.value & r.mask);
        void this.effects.inputs?.(this.inputs);
        return ok(`inputs=${hex16(this.inputs)}`);
      case 'HB':
        this.lastBeatMs = nowMs;
        if (this.heartbeat !== 'armed') this.heartbeat = 'armed';
        return ok(`hb=armed remaining_ms=${this.timeoutMs}`);
      case 'TIMEOUT':
        this.timeoutMs = r.ms;
        return ok(`timeout_ms=${this.timeoutMs}`);
    }
  }
}

/** The part of @serialport/binding-mock's port binding the simulated box uses. */
export interface MockPort {
  write(buffer: Buffer): Promise<void>;
  emitData(data: Buffer | string): void;
  readonly isOpen: boolean;
}

export interface ServedBox {
  model: BenchBoxModel;
  /** Stop answering (a box that went silent) or answer again. */
  silent: boolean;
  /** Restart the box: it forgets its state and announces BOOT. */
  reboot(): void;
  stop(): void;
}

/**
 * Serve a box model on an opened mock port: every line the host writes is handled, replies are emitted
 * back, the heartbeat watchdog ticks every 20 ms of wall time.
 */
export function serveOnMockPort(port: MockPort, model: BenchBoxModel, now: () => number = () => performance.now()): ServedBox {
  let pending = '';
  const served: ServedBox = {
    model,
    silent: false,
    reboot() {
      for (const l of model.boot(now())) port.emitData(l);
    },
    stop() {
      clearInterval(timer);
      port.write = original;
    },
  };
  const original = port.write.bind(port);
  port.write = async (buffer: Buffer) => {
    await original(buffer);
    pending += buffer.toString('latin1');
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (served.silent) continue;
      const out = model.handle(line, now());
      if (out.length) setImmediate(() => port.isOpen && port.emitData(out.join('')));
    }
  };
  const timer = setInterval(() => {
    const ev = model.tick(now());
    if (ev.length && port.isOpen && !served.silent) port.emitData(ev.join(''));
  }, 20);
  timer.unref();
  return served;
}
