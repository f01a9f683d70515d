// The event log (document 1 part 6 "Events", part 7 "Telemetry and events", part 8 limits): the poll
// GET /v1/events?after=<sequence> (up to 64 events, EventBatch cursors, the cursor rules), the 256-event
// ring with the synthetic events_dropped record, and the Server-Sent Events stream
// GET /v1/events/stream (id/event/data, no envelope, Last-Event-ID not read, JSON 409 cursor refusals).
// Every request here is made without a session, except the calls that generate events: mark_telemetry, or
// renew where the target does not serve mark_telemetry (Describe, document 1 part 1; harness/served.ts).

import { catalogue } from '../../harness/catalogue/index.ts';
import { isJsonObject, type JsonExact } from '../../harness/oracle/json.ts';
import type { Cell, Session } from '../../harness/clients/cell.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { eventBatchOf, eventCursor, pollEvents, readEventStream, type CellEvent } from '../../harness/clients/events.ts';
import { covers, describe, expect, inProfile, profile, test, type Description } from '../../harness/fixture.ts';
import { served } from '../../harness/served.ts';

const RING = 256;
const PER_POLL = 64;
const ENVELOPE_FIELDS = ['sequence', 'time_ns', 'type', 'daemon_incarnation', 'adapter_incarnation'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Payload field name per event type, from the catalogue (document 1 part 6 table). */
const PAYLOAD = new Map<string, string>(
  catalogue.filter((e) => e.family === 'event').map((e) => [(e as unknown as { type: string }).type, (e as unknown as { payload: string }).payload]),
);

/** Every event: the five envelope fields with their types, and exactly one payload field, the one of its type. */
function checkEvent(e: unknown): CellEvent {
  expect(isJsonObject(e), 'an event is a JSON object').toBe(true);
  const ev = e as CellEvent;
  expect(typeof ev.sequence).toBe('bigint');
  expect(ev.sequence).toBeGreaterThan(0n);
  expect(typeof ev.time_ns).toBe('bigint');
  expect(typeof ev.type).toBe('string');
  expect(typeof ev.daemon_incarnation).toBe('string');
  expect(ev.daemon_incarnation.length).toBeGreaterThan(0);
  expect(typeof ev.adapter_incarnation).toBe('string');
  expect(ev.adapter_incarnation.length).toBeGreaterThan(0);
  const payload = PAYLOAD.get(ev.type);
  expect(payload, `documented type ${ev.type}`).toBeDefined();
  const extra = Object.keys(ev).filter((k) => !ENVELOPE_FIELDS.includes(k));
  expect(extra, `payload fields of ${ev.type}`).toEqual([payload]);
  expect(isJsonObject(ev[payload!] as JsonExact)).toBe(true);
  return ev;
}

/**
 * Publish `n` events: mark_telemetry with labels `${prefix}-<i>` (telemetry_mark), or renew (grant_renewed)
 * where the target does not serve mark_telemetry.
 */
async function marks(cell: Cell, s: Session, prefix: string, n: number, d: Description): Promise<void> {
  const mark = served(d, 'mark_telemetry');
  for (let i = 0; i < n; i++) {
    const r = mark ? await cell.fenced('mark_telemetry', s, { label: `${prefix}-${i}` }) : await cell.fenced('renew', s);
    expect(r.status, `${mark ? 'mark' : 'renew'} ${prefix}-${i}: ${r.reply.error}`).toBe(200);
  }
}

function markLabel(e: CellEvent): string | undefined {
  return e.type === 'telemetry_mark' ? ((e.mark as { label: string }).label) : undefined;
}

/** The oldest retained sequence given the newest (the ring keeps the last 256). */
function oldestRetained(latest: bigint): bigint {
  return latest > BigInt(RING) ? latest - BigInt(RING) + 1n : 1n;
}

async function refusedCursor(client: ControlClient, query: string): Promise<string | undefined> {
  const r = await client.get(`/v1/events${query}`);
  expect(r.status, query).toBe(409);
  expect(r.reply.operation, query).toBe('subscribe_events');
  return r.label;
}

describe('poll', () => {
  test(
    'the log opens with adapter_incarnation_changed and daemon_incarnation_changed, empty previous and the current incarnations',
    covers('event:adapter_incarnation_changed', 'event:daemon_incarnation_changed', 'field:Event.incarnation.previous', 'field:Event.incarnation.current', 'rule:events.no_session', 'capability:subscribe_events'),
    async ({ client, description, skip }) => {
      const b = await pollEvents(client, 0n);
      // Only meaningful while the start-up events are still retained: on the sim target this file has a
      // stack of its own; a shared service (external, rig) may have rolled them out of its ring long ago.
      const oldest = b.events.find((e) => e.type !== 'events_dropped')?.sequence;
      skip(oldest !== undefined && oldest > 1n, `the service no longer retains its start-up events (oldest retained sequence ${oldest})`);
      const first = b.events.map(checkEvent);
      const adapter = first.find((e) => e.type === 'adapter_incarnation_changed');
      const daemon = first.find((e) => e.type === 'daemon_incarnation_changed');
      expect(adapter && daemon, 'start-up events retained').toBeTruthy();
      const ai = adapter!.incarnation as { previous: string; current: string };
      const di = daemon!.incarnation as { previous: string; current: string };
      expect(ai.previous).toBe('');
      expect(ai.current).toBe(description.adapter_incarnation);
      expect(ai.current).toBe(adapter!.adapter_incarnation);
      expect(di.current).toBe(description.daemon_incarnation);
    },
  );

  test(
    'a poll returns at most 64 contiguous events, next_sequence is the last returned, latest_sequence the newest; every event carries the envelope fields and one documented payload field',
    covers('endpoint:GET /v1/events', 'rule:events.poll_batch', 'limit:events_per_poll', 'field:EventBatch.next_sequence', 'field:EventBatch.latest_sequence', 'rule:events.sequence_increment', 'rule:events.envelope_fields', 'field:Event.sequence', 'field:Event.time_ns', 'field:Event.type', 'field:Event.daemon_incarnation', 'field:Event.adapter_incarnation', 'field:Event.grant.generation', 'field:Event.grant.stopping', 'rule:events.no_session'),
    async ({ cell, client, description }) => {
      const cursor = await eventCursor(client);
      const s = await cell.hold();
      await marks(cell, s, 'poll', PER_POLL + 10, description);
      const b = await pollEvents(client, cursor);
      expect(b.events.length).toBe(PER_POLL);
      expect(b.next_sequence).toBe(b.events[PER_POLL - 1]!.sequence);
      expect(b.latest_sequence).toBeGreaterThanOrEqual(cursor + BigInt(PER_POLL + 11));
      b.events.forEach((e, i) => {
        checkEvent(e);
        expect(e.sequence).toBe(cursor + 1n + BigInt(i));
        expect(e.adapter_incarnation).toBe(description.adapter_incarnation);
        expect(e.daemon_incarnation).toBe(description.daemon_incarnation);
      });
      const acquired = b.events.find((e) => e.type === 'grant_acquired');
      expect(acquired, 'grant_acquired in the batch').not.toBeUndefined();
      expect((acquired!.grant as { generation: bigint }).generation).toBe(s.generation);
      expect((acquired!.grant as { stopping: boolean }).stopping).toBe(false);
      // time_ns is the publication time: never decreasing along the log.
      for (let i = 1; i < b.events.length; i++) expect(b.events[i]!.time_ns).toBeGreaterThanOrEqual(b.events[i - 1]!.time_ns);
      // The next poll continues from next_sequence with the following sequence.
      const b2 = await pollEvents(client, b.next_sequence);
      expect(b2.events[0]!.sequence).toBe(b.next_sequence + 1n);
      b2.events.forEach(checkEvent);
      // Caught up: no events, next_sequence stays at the cursor.
      // Caught up: polling at the newest sequence returns nothing and leaves next_sequence at the cursor.
      const latest = await eventCursor(client);
      const now = await pollEvents(client, latest);
      expect(now.latest_sequence).toBeGreaterThanOrEqual(latest);
      const published = Number(now.latest_sequence - latest);
      expect(now.events.length).toBe(published);
      expect(now.next_sequence).toBe(latest + BigInt(published));
    },
  );

  test('after omitted or 0 starts at the oldest retained event', covers('rule:events.cursor_zero'), async ({ client }) => {
    for (const query of ['', '?after=0']) {
      const r = await client.get(`/v1/events${query}`, 'subscribe_events');
      expect(r.status).toBe(200);
      const d = eventBatchOf(r.reply.data);
      expect(d.events.length).toBeGreaterThan(0);
      expect(d.events[0]!.sequence, query).toBe(oldestRetained(d.latest_sequence));
      expect(d.events[0]!.type).not.toBe('events_dropped');
    }
  });

  for (const bad of ['abc', '-1', '+1', '1.0', '1e3', ' 1', '0x10', '18446744073709551616', '']) {
    test(`after=${JSON.stringify(bad)} is refused with 409 invalid_event_cursor naming subscribe_events`, covers('reason:invalid_event_cursor', 'rule:events.cursor_invalid'), async ({ client }) => {
      expect(await refusedCursor(client, `?after=${encodeURIComponent(bad)}`)).toBe('invalid_event_cursor');
    });
  }

  // "01" is written with the digits of one unsigned decimal number: refusing a leading zero is ours
  // (docs/profile.md "Events"); a target reading it as 1 answers the batch after 1.
  test('after="01" is refused with 409 invalid_event_cursor naming subscribe_events', covers('rule:events.cursor_invalid', 'profile:events.cursor_form'), async ({ client }) => {
    const r = await client.get('/v1/events?after=01');
    expect(r.reply.operation).toBe('subscribe_events');
    if (r.status === 409) expect(['invalid_event_cursor', 'event_cursor_ahead']).toContain(r.label);
    else expect(r.status).toBe(200);
    await inProfile('profile:events.cursor_form', () => expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'invalid_event_cursor' }));
  });

  // "It must be one unsigned decimal number" (part 6): a repeated after is not one number, whichever comes first.
  for (const query of ['?after=1&after=abc', '?after=abc&after=1', '?after=0&after=0']) {
    test(`${query} (repeated cursor) is refused with 409 invalid_event_cursor`, covers('reason:invalid_event_cursor', 'rule:events.cursor_invalid'), async ({ client }) => {
      expect(await refusedCursor(client, query)).toBe('invalid_event_cursor');
    });
  }

  test('the largest uint64 cursor is well-formed and, being newer than the log, refused with event_cursor_ahead', covers('reason:event_cursor_ahead', 'rule:events.cursor_ahead'), async ({ client }) => {
    expect(await refusedCursor(client, '?after=18446744073709551615')).toBe('event_cursor_ahead');
  });

  test('a cursor newer than the log is refused with 409 event_cursor_ahead; the newest itself is accepted', covers('reason:event_cursor_ahead', 'rule:events.cursor_ahead'), async ({ client }) => {
    const latest = await eventCursor(client);
    expect(await refusedCursor(client, `?after=${latest + 1n}`)).toBe('event_cursor_ahead');
    const b = await pollEvents(client, latest);
    expect(b.next_sequence).toBeGreaterThanOrEqual(latest);
  });
});

describe('ring', () => {
  test(
    'the log keeps the last 256 events: an older cursor first gets events_dropped for first..last lost (inclusive) with sequence last_lost_sequence, then the retained events with their original sequences',
    covers('limit:event_log_retained', 'rule:events.ring_256', 'rule:events.dropped_synthetic', 'rule:events.original_sequences', 'event:events_dropped', 'field:Event.events_dropped.first_lost_sequence', 'field:Event.events_dropped.last_lost_sequence', 'rule:events.envelope_fields'),
    async ({ cell, client, description }) => {
      const start = await eventCursor(client);
      expect(start).toBeGreaterThan(0n);
      const s = await cell.hold();
      // Record every event's sequence while it is still retained (renewals interleave with the marks).
      const seen = new Map<bigint, CellEvent>();
      let follow = start;
      const record = async () => {
        for (;;) {
          const b = await pollEvents(client, follow);
          for (const e of b.events) {
            expect(e.type).not.toBe('events_dropped');
            seen.set(e.sequence, e);
          }
          if (!b.events.length) break;
          follow = b.next_sequence;
        }
      };
      for (let round = 0; round < 7; round++) {
        await marks(cell, s, `ring${round}`, 50, description);
        await record();
      }
      // Release, so that no renewal publishes while the ring is read (the keeper stops at its first refusal).
      expect((await cell.fenced('release', s)).status).toBe(200);
      await sleep(Math.max(100, s.grant.lease_ms));
      await record();
      const b = await pollEvents(client, start);
      const latest = b.latest_sequence;
      expect(await eventCursor(client)).toBe(latest);
      expect(latest - start).toBeGreaterThan(BigInt(RING + 44));
      const oldest = oldestRetained(latest);
      const dropped = checkEvent(b.events[0]);
      expect(dropped.type).toBe('events_dropped');
      const d = dropped.events_dropped as { first_lost_sequence: bigint; last_lost_sequence: bigint };
      expect(d.first_lost_sequence).toBe(start + 1n);
      expect(d.last_lost_sequence).toBe(oldest - 1n);
      expect(dropped.sequence).toBe(d.last_lost_sequence);
      expect(dropped.adapter_incarnation).toBe(description.adapter_incarnation);
      // 64 records in the batch: the synthetic one and 63 retained events.
      expect(b.events.length).toBe(PER_POLL);
      // Follow to the end: exactly the 256 retained events, each as it was when first seen.
      const retained: CellEvent[] = b.events.slice(1);
      let cursor = b.next_sequence;
      while (cursor < latest) {
        const n = await pollEvents(client, cursor);
        if (!n.events.length) break;
        expect(n.events[0]!.type).not.toBe('events_dropped');
        retained.push(...n.events.filter((e) => e.sequence <= latest));
        cursor = n.next_sequence;
      }
      expect(retained.length).toBe(RING);
      retained.forEach((e, i) => {
        expect(e.sequence).toBe(oldest + BigInt(i));
        const first = seen.get(e.sequence);
        expect(first, `sequence ${e.sequence} seen while retained`).toBeDefined();
        expect(e.type).toBe(first!.type);
        expect(markLabel(e)).toBe(markLabel(first!));
        expect(e.time_ns).toBe(first!.time_ns);
      });
      // A cursor exactly at the oldest boundary lost nothing: no synthetic record.
      const edge = await pollEvents(client, oldest - 1n);
      expect(edge.events[0]!.sequence).toBe(oldest);
      expect(edge.events[0]!.type).not.toBe('events_dropped');
      // One older: exactly one sequence lost.
      const one = await pollEvents(client, oldest - 2n);
      const od = one.events[0]!;
      expect(od.type).toBe('events_dropped');
      expect(od.events_dropped).toMatchObject({ first_lost_sequence: oldest - 1n, last_lost_sequence: oldest - 1n });
      expect(od.sequence).toBe(oldest - 1n);
      expect(one.events[1]!.sequence).toBe(oldest);
    },
  );

  test(
    'the synthetic events_dropped record carries reason event_cursor_lost',
    profile('profile:events.dropped_reason', 'reason:event_cursor_lost'),
    async ({ cell, client, description }) => {
      let latest = await eventCursor(client);
      if (latest < BigInt(RING + 2)) {
        const s = await cell.hold();
        await marks(cell, s, 'lost', RING + 2, description);
        latest = await eventCursor(client);
      }
      const b = await pollEvents(client, 1n);
      expect(b.events[0]!.type).toBe('events_dropped');
      expect((b.events[0]!.events_dropped as { reason: string }).reason).toBe('event_cursor_lost');
    },
  );
});

describe('stream', () => {
  test(
    'the stream is text/event-stream; each message has id (sequence), event (type) and data (one Event as JSON, no envelope), starting after the cursor and following new events live',
    covers('endpoint:GET /v1/events/stream', 'rule:events.sse_messages', 'rule:events.no_session', 'rule:events.envelope_fields', 'rule:events.sequence_increment', 'rule:op.mark_telemetry.event', 'event:telemetry_mark', 'profile:events.stream_no_store'),
    async ({ cell, client, description }) => {
      // The test's own events: three marks before the stream opens and one while it is open; or, where the
      // target does not serve mark_telemetry, a grant acquired and released before and a second grant
      // acquired while it is open (grant events, told apart by generation; no renewal in the background).
      const mark = served(description, 'mark_telemetry');
      // The grant is held (renewed in the background), so grant_renewed events may fall between the marks:
      // the cursor is read before the backlog, and the marks are picked out of the contiguous sequence.
      const s = mark ? await cell.hold() : undefined;
      const from = await eventCursor(client);
      const first = mark ? undefined : await cell.grant();
      if (mark) await marks(cell, s!, 'backlog', 3, description);
      else expect((await cell.fenced('release', first!)).status).toBe(200);
      const isLive = (e: CellEvent) => (mark ? markLabel(e) === 'live-1' : e.type === 'grant_acquired' && (e.grant as { generation: bigint }).generation > first!.generation);
      let opened = false;
      // Read until the live event arrives (the bound is only a safety net, no timing is asserted).
      const live = readEventStream(client, from, 30_000, { onOpen: () => (opened = true), until: (m) => isLive(m.parsed as CellEvent) });
      for (let i = 0; !opened && i < 3_000; i++) await sleep(10);
      expect(opened, 'the stream opened').toBe(true);
      await sleep(100);
      const second = mark ? undefined : await cell.grant();
      if (mark) expect((await cell.fenced('mark_telemetry', s!, { label: 'live-1' })).status).toBe(200);
      const cap = await live;
      expect(cap.status).toBe(200);
      expect(cap.headers['content-type']).toMatch(/^text\/event-stream\b/);
      await inProfile('profile:events.stream_no_store', () => expect(cap.headers['cache-control']).toBe('no-store'));
      expect(cap.ended).toBe(false);
      expect(cap.messages.length).toBeGreaterThanOrEqual(mark ? 4 : 3);
      let expected = from + 1n;
      for (const m of cap.messages) {
        const e = checkEvent(m.parsed);
        expect(m.id).toBe(String(e.sequence));
        expect(m.event).toBe(e.type);
        expect(m.data).not.toContain('\n');
        expect(e).not.toHaveProperty('operation');
        expect(e).not.toHaveProperty('data');
        expect(e.sequence).toBe(expected++);
      }
      const events = cap.messages.map((m) => m.parsed as CellEvent);
      if (mark) {
        // Starting after the cursor: the first message is from + 1 (checked above); the marks come in order,
        // the backlog before the live one, and nothing else is a mark.
        const labels = events.map(markLabel).filter((l) => l !== undefined);
        expect(labels).toEqual(['backlog-0', 'backlog-1', 'backlog-2', 'live-1']);
        expect(cap.messages.filter((m) => m.event !== 'telemetry_mark').map((m) => m.event)).toEqual(cap.messages.filter((m) => m.event !== 'telemetry_mark').map(() => 'grant_renewed'));
        expect(events.find(isLive)!.mark).toMatchObject({ label: 'live-1', generation: s!.generation });
      } else {
        const ours = events.filter((e) => e.type.startsWith('grant_')).map((e) => [e.type, (e.grant as { generation: bigint }).generation]);
        expect(ours).toEqual([
          ['grant_acquired', first!.generation],
          ['grant_released', first!.generation],
          ['grant_acquired', second!.generation],
        ]);
      }
      const liveEvent = events.find(isLive);
      expect(liveEvent, 'the event published while connected arrives on the stream').toBeDefined();
      // The stream and the poll agree on the same record.
      const polled = (await pollEvents(client, liveEvent!.sequence - 1n)).events[0]!;
      expect(polled).toEqual(liveEvent);
    },
  );

  test(
    'Last-Event-ID is not read: a stream with Last-Event-ID 5 and after=0 starts at the oldest retained event',
    covers('rule:events.last_event_id_ignored', 'rule:events.cursor_zero'),
    async ({ client }) => {
      const latest = await eventCursor(client);
      const cap = await readEventStream(client, 0n, 30_000, { headers: { 'last-event-id': '5' }, until: () => true });
      expect(cap.status).toBe(200);
      expect(cap.messages.length).toBe(1);
      expect(cap.messages[0]!.id).toBe(String(oldestRetained(latest)));
      expect(cap.messages[0]!.event).not.toBe('events_dropped');
      // And with a cursor: after wins over Last-Event-ID.
      const c2 = await readEventStream(client, latest - 1n, 30_000, { headers: { 'last-event-id': '1' }, until: () => true });
      expect(c2.messages[0]!.id).toBe(String(latest));
    },
  );

  test(
    'the stream sends the whole retained backlog at once, the ring bound from both sides: a cursor just before the oldest retained event gets all 256 and nothing dropped; one event older, events_dropped for exactly that one first',
    covers('limit:event_log_retained', 'rule:events.ring_256', 'rule:events.dropped_synthetic', 'rule:events.original_sequences', 'rule:events.sse_messages'),
    async ({ cell, client, description }) => {
      let latest = await eventCursor(client);
      if (latest < BigInt(RING + 2)) {
        const s = await cell.hold();
        await marks(cell, s, 'sse-ring', RING + 2, description);
        // Release first: a renewal published after the cursor is read would move the ring's oldest event.
        expect((await cell.fenced('release', s)).status).toBe(200);
        latest = await eventCursor(client);
      }
      const oldest = oldestRetained(latest);
      // The stream, not the poll: no batches of 64; read until the newest event (the bound is a safety net).
      const whole = await readEventStream(client, oldest - 1n, 30_000, { until: (m) => m.id === String(latest) });
      expect(whole.status).toBe(200);
      const ids = whole.messages.map((m) => BigInt(m.id!));
      expect(ids.length, 'every retained event, none dropped').toBe(RING);
      expect(ids[0]).toBe(oldest);
      expect(ids.at(-1)).toBe(latest);
      expect(whole.messages.some((m) => m.event === 'events_dropped')).toBe(false);
      ids.forEach((id, i) => expect(id).toBe(oldest + BigInt(i)));
      // One older: that single event is lost and reported as such, then the same 256.
      const lost = await readEventStream(client, oldest - 2n, 30_000, { until: (m) => m.id === String(latest) });
      expect(lost.messages.length).toBe(RING + 1);
      const d = checkEvent(lost.messages[0]!.parsed);
      expect(lost.messages[0]!.event).toBe('events_dropped');
      expect(d.events_dropped).toMatchObject({ first_lost_sequence: oldest - 1n, last_lost_sequence: oldest - 1n });
      expect(d.sequence).toBe(oldest - 1n);
      expect(lost.messages.slice(1).map((m) => BigInt(m.id!))).toEqual(ids);
    },
  );

  test('a stream from a cursor older than the ring starts with events_dropped', covers('rule:events.dropped_synthetic', 'rule:events.sse_messages', 'event:events_dropped'), async ({ cell, client, description }) => {
    let latest = await eventCursor(client);
    if (latest < BigInt(RING + 2)) {
      const s = await cell.hold();
      await marks(cell, s, 'sse-lost', RING + 2, description);
      // Release first: a renewal published after the cursor is read would move the ring's oldest event.
      expect((await cell.fenced('release', s)).status).toBe(200);
      latest = await eventCursor(client);
    }
    // Read until the oldest retained event (the bound is a safety net, no timing is asserted).
    const cap = await readEventStream(client, 1n, 30_000, { until: (m) => m.id === String(oldestRetained(latest)) });
    expect(cap.messages.length).toBe(2);
    const [d, first] = cap.messages.map((m) => checkEvent(m.parsed));
    expect(cap.messages[0]!.event).toBe('events_dropped');
    expect(d!.events_dropped).toMatchObject({ first_lost_sequence: 2n, last_lost_sequence: oldestRetained(latest) - 1n });
    expect(cap.messages[0]!.id).toBe(String(oldestRetained(latest) - 1n));
    expect(first!.sequence).toBe(oldestRetained(latest));
  });

  test('a stream with after=01 is refused with a JSON 409 invalid_event_cursor before any stream byte', covers('endpoint:GET /v1/events/stream', 'profile:events.cursor_form'), async ({ client }) => {
    // Ours to refuse (see the poll); a target reading it as 1 streams from there, and never answers otherwise.
    const cap = await readEventStream(client, '01', 500);
    if (cap.status === 409) expect(cap.refusal!.label).toBe('invalid_event_cursor');
    else expect(cap.status).toBe(200);
    await inProfile('profile:events.cursor_form', () => expect({ status: cap.status, label: cap.refusal?.label, messages: cap.messages.length }).toEqual({ status: 409, label: 'invalid_event_cursor', messages: 0 }));
  });

  for (const [query, label] of [
    ['abc', 'invalid_event_cursor'],
    ['-1', 'invalid_event_cursor'],
    ['ahead', 'event_cursor_ahead'],
  ] as const) {
    test(`a stream with after=${query} is refused with a JSON 409 ${label} before any stream byte`, covers(`reason:${label}`, label === 'event_cursor_ahead' ? 'rule:events.cursor_ahead' : 'rule:events.cursor_invalid', 'endpoint:GET /v1/events/stream'), async ({ client }) => {
      const after = query === 'ahead' ? String((await eventCursor(client)) + 1n) : query;
      const cap = await readEventStream(client, after, 2_000);
      expect(cap.status).toBe(409);
      expect(cap.headers['content-type']).toMatch(/^application\/json/);
      expect(cap.refusal!.label).toBe(label);
      expect(cap.messages).toEqual([]);
    });
  }
});
