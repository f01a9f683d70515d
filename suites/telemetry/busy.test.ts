// telemetry_busy (document 1 part 7): "ring header torn after 16 samples; response carries Retry-After 1;
// retry same cursor; on an established stream becomes an empty batch with unchanged cursor". The reference
// stack's private test channel holds one capture write in progress (`hold_capture_write`, docs/profile.md),
// so every reader sees a torn ring header for that long. Every poll here takes the first answer as it came
// (`busy: 'answer'`); elsewhere the harness's readers ask again on telemetry_busy, as the document says.

import { latestSequence, pollTelemetry, readStream } from '../../harness/clients/telemetry.ts';
import { covers, describe, expect, hostBound, needsFaults, test } from '../../harness/fixture.ts';

const HOLD_MS = 1_500;

describe('telemetry_busy', () => {
  // The reference stack's service can take its reader's next N header samples as torn
  // (`tear_header_samples`, docs/profile.md): the documented 16 is then seen from both sides.
  test('the ring header is sampled 16 times: torn for 15 samples a poll is answered, torn for 16 it is telemetry_busy', covers('limit:telemetry_busy_samples', 'reason:telemetry_busy'), async ({ client, target, skip }) => {
    needsFaults({ skip }, target);
    const after = await latestSequence(client);
    // The 16th sample is a real one, and a real sample is torn whenever it meets the writer inside a record
    // (rarely; more often on a loaded machine): a 409 there is tried again, up to three times. A cell that
    // gives up after 15 samples answers 409 every time.
    let answered: Awaited<ReturnType<typeof pollTelemetry>> | undefined;
    for (let attempt = 1; attempt <= 3; attempt++) {
      await target.inject({ kind: 'tear_header_samples', samples: 15 });
      answered = await pollTelemetry(client, after, { busy: 'answer' });
      if (answered.raw.status === 200) break;
    }
    expect(answered!.raw.status, 'torn for 15 samples: the 16th is clean').toBe(200);
    await target.inject({ kind: 'tear_header_samples', samples: 16 });
    const busy = await pollTelemetry(client, after, { busy: 'answer' });
    expect(busy.raw.status, 'torn for 16 samples').toBe(409);
    expect(busy.refusal!.label).toBe('telemetry_busy');
    expect(busy.raw.headers['retry-after']).toBe('1');
    // The torn samples were used up by that poll: the same cursor is answered again.
    const again = await pollTelemetry(client, after, { busy: 'answer' });
    expect(again.raw.status).toBe(200);
    expect(again.batch!.header.first_sequence === 0n || again.batch!.records[0]!.seq === after + 1n).toBe(true);
  });

  test('a poll while the ring header is torn answers 409 telemetry_busy with Retry-After 1; the same cursor succeeds afterwards', covers('reason:telemetry_busy', 'limit:telemetry_busy_retry_after_s', 'rule:telemetry.busy_retry'), async ({ client, target, skip }) => {
    needsFaults({ skip }, target);
    const after = await latestSequence(client);
    const held = performance.now();
    await target.inject({ kind: 'hold_capture_write', ms: HOLD_MS });
    // The poll must reach the service inside the hold: a harness that took longer than the hold to send it
    // sees the record written, which says nothing about telemetry_busy.
    const p = await hostBound(
      { rule: 'document 1 part 7 telemetry_busy: a poll inside the held write', marginMs: HOLD_MS, measured: () => ({ ms: performance.now() - held, what: 'from the hold to the poll answered' }) },
      async () => {
        const p = await pollTelemetry(client, after, { busy: 'answer' });
        expect(p.raw.status).toBe(409);
        return p;
      },
    );
    expect(p.refusal!.label).toBe('telemetry_busy');
    expect(p.refusal!.reply.operation).toBe('telemetry');
    expect(p.raw.headers['retry-after']).toBe('1');
    // After the hold: the same cursor gives contiguous records from after + 1.
    await new Promise((r) => setTimeout(r, HOLD_MS + 100));
    const ok = await pollTelemetry(client, after, { busy: 'answer' });
    expect(ok.raw.status).toBe(200);
    expect(ok.batch!.header.record_count).toBeGreaterThan(0);
    expect(ok.batch!.records[0]!.seq).toBe(after + 1n);
  });

  test('on an established stream a torn header gives empty batches with the cursor unchanged, then records resume', covers('reason:telemetry_busy'), async ({ client, target, skip }) => {
    needsFaults({ skip }, target);
    let injected = false;
    let cursorAtHold = -1n;
    let sawEmpty = false;
    let recordsBack = false;
    // More than ten empty batches in the 1.5 s hold at one about every 20 ms, the slowest admitted 60 ms:
    // 840 ms to spare; the harness's loop stalling longer than that in all leaves the count saying nothing.
    await hostBound({ rule: 'document 1 part 7 telemetry_busy on a stream: empty batches while the header is torn', marginMs: HOLD_MS - 11 * 60, stalls: 'total' }, async () => {
    // Read until records resume after the empty batches (at most the hold and 3 s more).
    const cap = await readStream(client, await latestSequence(client), HOLD_MS + 3_000, {
      onBatch: (b) => {
        if (!injected && b.header.record_count > 0) {
          injected = true;
          cursorAtHold = b.header.last_sequence;
          void target.inject({ kind: 'hold_capture_write', ms: HOLD_MS });
        } else if (injected && b.header.record_count === 0) sawEmpty = true;
        else if (sawEmpty && b.header.record_count > 0) recordsBack = true;
      },
      until: () => recordsBack,
    });
    expect(cap.status).toBe(200);
    expect(injected).toBe(true);
    const all = cap.batches.map((x) => x.batch.header);
    const i0 = all.findIndex((h) => h.last_sequence === cursorAtHold);
    const firstEmpty = all.findIndex((h, i) => i > i0 && h.record_count === 0);
    expect(firstEmpty).toBeGreaterThan(0);
    const cursor = all[firstEmpty - 1]!.last_sequence; // the cursor the stream had reached
    // While held: empty batches (first_sequence 0, nothing dropped) whose last_sequence is that cursor.
    const held = all.slice(firstEmpty);
    const run = held.findIndex((h) => h.record_count > 0);
    const empties = run < 0 ? held : held.slice(0, run);
    expect(empties.length).toBeGreaterThan(10); // 1.5 s at one batch about every 20 ms
    for (const h of empties) expect({ first: h.first_sequence, last: h.last_sequence, dropped: h.dropped }).toEqual({ first: 0n, last: cursor, dropped: 0n });
    // Afterwards records resume, contiguous with the unchanged cursor.
    expect(run, 'records after the hold').toBeGreaterThan(0);
    const resumed = held[run]!;
    expect(resumed.first_sequence).toBe(cursor + resumed.dropped + 1n);
    });
  });
});
