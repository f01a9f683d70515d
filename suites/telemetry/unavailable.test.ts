// A cell without a telemetry capture ring (document 1 part 7: telemetry_unavailable; all telemetry errors
// are JSON with HTTP 409). Needs a stack started with capture off, which only the sim target can do.

import { afterAll } from 'vitest';
import { ControlClient } from '../../harness/clients/control.ts';
import { pollTelemetry, readStream } from '../../harness/clients/telemetry.ts';
import { startStack, type StackProcess } from '../../harness/targets/sim.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';

const onSim = (process.env.HIL_TARGET ?? 'sim') === 'sim';
const opened: Array<{ stack: StackProcess; client: ControlClient }> = [];
afterAll(async () => {
  for (const o of opened.splice(0)) {
    await o.client.close();
    await o.stack.stop();
  }
});

describe('capture off', () => {
  test('poll and stream answer 409 telemetry_unavailable as JSON Responses', covers('reason:telemetry_unavailable', 'rule:telemetry.errors_json_409'), async ({ skip }) => {
    skip(!onSim, 'needs the sim target: only it can start a stack with telemetry capture off');
    const stack = await startStack(['--capture-retention-ms', '0']);
    const client = new ControlClient(stack.ready.control);
    opened.push({ stack, client });
    const p = await pollTelemetry(client, 0n);
    expect(p.raw.status).toBe(409);
    expect(p.raw.headers['content-type']).toMatch(/^application\/json/);
    expect(p.refusal!.label).toBe('telemetry_unavailable');
    expect(p.refusal!.reply.operation).toBe('telemetry');
    const s = await readStream(client, 0n, 2_000);
    expect(s.status).toBe(409);
    expect(s.refusal!.label).toBe('telemetry_unavailable');
    // The rest of the service is unaffected.
    expect((await client.status()).status).toBe(200);
  });
});
