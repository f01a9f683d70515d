// The private test channel (`hil serve --test-channel`; not part of the documented interface): a Unix
// socket of its own, mode 0600, through which the harness injects faults (drivers/faults.ts), steps a
// stepped clock and restarts the core. JSON in and out; nothing here is a catalogue refusal.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeJson } from '../json.ts';
import { DISCARD_BOUND_BYTES, readBoundedBody } from '../primitives.ts';
import type { CoreLink } from './core-link.ts';
import type { TelemetryEndpoints } from './telemetry.ts';

/** What the test channel reaches of the service. */
export interface TestChannelTarget {
  core: CoreLink;
  telemetry: TelemetryEndpoints;
  daemonIncarnation(): string;
}

export async function testChannelRoute(ch: TestChannelTarget, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const json = (status: number, body: unknown) => {
    const b = Buffer.from(encodeJson(body));
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': b.length });
    res.end(b);
  };
  try {
    const body = await readBoundedBody(req, { limit: 65536, refuse: 'declared', discardBound: DISCARD_BOUND_BYTES });
    if (body === 'too_large') return json(413, { error: 'too large' });
    if (body === 'gone') return; // nobody is left to answer
    const input = body.length ? (JSON.parse(Buffer.from(body).toString('utf8')) as Record<string, unknown>) : {};
    switch (`${req.method} ${url.pathname}`) {
      case 'POST /inject': {
        if (input.kind === 'tear_header_samples') {
          // The service's own reader, not the core: the next N ring header samples count as torn.
          const n = input.samples;
          if (!Number.isSafeInteger(n) || (n as number) < 1 || (n as number) > 64) return json(409, { ok: false, detail: 'FAULT_BAD_FIELD: tear_header_samples: field samples must be an integer 1..64' });
          try {
            ch.telemetry.tearHeaderSamples(n as number);
          } catch (e) {
            return json(409, { ok: false, detail: (e as Error).message });
          }
          return json(200, { ok: true });
        }
        const r = await ch.core.inject(input as never);
        return json(r.result.Result === 0 ? 200 : 409, { ok: r.result.Result === 0, detail: r.detail });
      }
      case 'POST /step': {
        // Stepped clock only: run N cycles now (bounded so one request cannot hold the core for long).
        const cycles = input.cycles;
        if (!Number.isSafeInteger(cycles) || (cycles as number) < 1 || (cycles as number) > 10_000_000) return json(400, { error: 'cycles must be an integer 1..10000000' });
        const r = await ch.core.step(cycles as number);
        // `waiting`: the answers the core owed when the step was done (CoreHost.owed).
        return r.result.Result === 0 ? json(200, { ok: true, now_ns: r.extra?.now_ns, cycles: r.extra?.cycles, answered: r.extra?.answered, ...(r.extra?.owed !== undefined ? { waiting: r.extra.owed } : {}) }) : json(409, { ok: false, detail: r.detail });
      }
      case 'POST /core-waits':
        // Without a cycle: the answers the core owes now (harness/clients/stepped.ts settle).
        return json(200, { ok: true, waiting: await ch.core.owed() });
      case 'POST /restart-core':
        await ch.core.crash();
        await new Promise((r) => setImmediate(r)); // let the service record the new incarnation
        return json(200, { ok: true, daemon_incarnation: ch.daemonIncarnation() });
      default:
        return json(404, { error: 'unknown test route' });
    }
  } catch (e) {
    json(500, { error: (e as Error).message });
  }
}
