// A cell without a telemetry capture ring (document 1 part 7: telemetry_unavailable; all telemetry errors
// are JSON with HTTP 409). Needs a variant of the target with capture off; a target that cannot start
// one skips with its reason.

import { pollTelemetry, readStream } from '../../harness/clients/telemetry.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';

describe('capture off', () => {
  test('poll and stream answer 409 telemetry_unavailable as JSON Responses', covers('reason:telemetry_unavailable', 'rule:telemetry.errors_json_409'), async ({ variant }) => {
    const client = (await variant({ telemetry: 'off' })).client();
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
