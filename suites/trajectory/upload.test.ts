// prepare_trajectory as an upload (document 1 part 4 prepare_trajectory: "Body up to 222516384 bytes;
// schema, operation, session and a nonzero generation must appear within the first 16384 bytes, before
// points, so the service admits the fence and reserves the upload slot before reading the rest"; part 8
// limits: points 2..250000, one upload of the same kind at a time). Bodies are written here as raw text
// (whitespace padding places a member exactly at a byte boundary) and streamed over the control socket.

import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import type { Cell, Session } from '../../harness/clients/cell.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import { checkReply } from '../../harness/oracle/reply.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, measure, needsMotion, test } from '../../harness/fixture.ts';
import type { Target } from '../../harness/targets/types.ts';

const SCHEMA = 'svc.rt-control.request.v1';
const PREFIX = 16384;
const BODY_LIMIT = 222_516_384;
const enc = new TextEncoder();

/** Points text: `n` points 1 ms apart, every axis at `hold` (logical units), as compact JSON. */
function pointsText(hold: number[], n: number): string {
  return Buffer.concat([...pointsChunks(hold, n)]).toString('utf8');
}

/**
 * `pointsText` written straight into bytes, in turns: the limit test's two bodies of a quarter of a million
 * points each cost this process far more built as strings and then encoded, and built in one piece they held
 * its thread for seconds on a loaded host (on a rig the bench box's heartbeat with it: docs/benchbox.md).
 */
async function pointsBytes(hold: number[], n: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for (const part of pointsChunks(hold, n)) {
    parts.push(part);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return Buffer.concat(parts);
}

/** The points array's bytes (`n` of at least 1) in pieces of up to `per` points: `[`, the points, `]`. */
function* pointsChunks(hold: number[], n: number, per = 8192): Generator<Uint8Array> {
  const head = enc.encode('{"time_ns":');
  const mid = enc.encode(`,"position":[${hold.map((q) => JSON.stringify(q)).join(',')}]}`);
  const maxDigits = String((n - 1) * 1_000_000).length;
  for (let from = 0; from < n; from += per) {
    const to = Math.min(n, from + per);
    const out = new Uint8Array(2 + (to - from) * (head.length + maxDigits + mid.length + 1));
    let at = 0;
    if (from === 0) out[at++] = 0x5b; // [
    for (let k = from; k < to; k++) {
      if (k > 0) out[at++] = 0x2c; // ,
      out.set(head, at);
      at += head.length;
      at += enc.encodeInto(String(k * 1_000_000), out.subarray(at)).written;
      out.set(mid, at);
      at += mid.length;
    }
    if (to === n) out[at++] = 0x5d; // ]
    yield out.subarray(0, at);
  }
}

/** A body whose generation member's value ends exactly `end` bytes into the body (whitespace before it). */
function fenceEndingAt(s: Session, end: number, rest: string): string {
  const head = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}",`;
  const gen = `"generation":${s.generation}`;
  const pad = end - head.length - gen.length;
  if (pad < 0) throw new Error('boundary too small');
  return head + ' '.repeat(pad) + gen + rest;
}

async function post(target: Target, input: string | Uint8Array | AsyncIterable<Uint8Array>, headers: Record<string, string> = {}) {
  const body = typeof input === 'string' || input instanceof Uint8Array ? input : Readable.from(input);
  const agent = new Agent({ connect: { socketPath: target.address }, bodyTimeout: 60_000, headersTimeout: 60_000 });
  try {
    const res = await request('http://localhost/v1/control', { method: 'POST', body, dispatcher: agent, headers: { 'content-type': 'application/json', ...headers } });
    const bytes = new Uint8Array(await res.body.arrayBuffer());
    return checkReply(res.statusCode, String(res.headers['content-type'] ?? ''), bytes, 'prepare_trajectory');
  } finally {
    await agent.close();
  }
}

/**
 * The axes' positions. A status without the core's publication has no axes to hold: the file's target is
 * handed over once its core has published (harness/fixture.ts, the description fixture), and a target
 * whose core never does fails here, not with a refused upload of points without positions.
 */
async function positions(client: ControlClient): Promise<number[]> {
  const st = await readStatus(client);
  expect(st.axes.length, "the core's first status publication").toBeGreaterThan(0);
  return st.axes.map((a) => Number(a.position));
}

async function holdAll(cell: Cell, client: ControlClient): Promise<{ s: Session; hold: number[] }> {
  const s = await cell.hold({ requested_lease_ms: 2_000 });
  return { s, hold: await positions(client) };
}

describe('the fence within the first 16384 bytes', () => {
  test(
    'a generation ending at byte 16384 is admitted; one byte later it is refused invalid_request_envelope',
    covers('rule:op.prepare_trajectory.fence_prefix', 'limit:fence_prefix_bytes', 'profile:upload.prefix'),
    async ({ cell, client, target, skip }) => {
      needsMotion({ skip }, target);
      const { s, hold } = await holdAll(cell, client);
      const rest = `,"axis_mask":1,"points":${pointsText(hold, 3)}}`;
      const at = await post(target, fenceEndingAt(s, PREFIX, rest));
      expect(at.status, at.reply.error).toBe(200);
      expect(at.reply.handle).toBeGreaterThan(0n);
      const past = await post(target, fenceEndingAt(s, PREFIX + 1, rest));
      expect(past.status).toBe(409);
      expect(past.label).toBe('invalid_request_envelope');
    },
  );
});

describe('the full decode against the admitted prefix', () => {
  test(
    'a fence member repeated after points with another value is request_envelope_changed; with the same value duplicate_request_field; nothing is prepared',
    covers('reason:request_envelope_changed', 'rule:envelope.changed_after_prefix', 'reason:duplicate_request_field', 'profile:upload.prefix'),
    async ({ cell, client, target, skip }) => {
      needsMotion({ skip }, target);
      const { s, hold } = await holdAll(cell, client);
      const handles = async () => ((await readStatus(client)) as unknown as { execution: { handles: unknown[] } }).execution.handles.length;
      const head = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"axis_mask":1,"points":${pointsText(hold, 3)}`;
      const before = await handles();
      for (const [what, tail, label] of [
        ['generation one higher', `,"generation":${s.generation + 1n}}`, 'request_envelope_changed'],
        ['another session', `,"session":"${'0'.repeat(s.session.length)}"}`, 'request_envelope_changed'],
        ['the same generation again', `,"generation":${s.generation}}`, 'duplicate_request_field'],
      ] as const) {
        const r = await post(target, head + tail);
        expect({ what, status: r.status, label: r.label }).toEqual({ what, status: 409, label });
      }
      // Past byte 16384 but before points is outside the prefix too.
      const far = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"label":"${'p'.repeat(PREFIX)}","generation":${s.generation + 1n},"axis_mask":1,"points":${pointsText(hold, 3)}}`;
      const r = await post(target, far);
      expect({ status: r.status, label: r.label }).toEqual({ status: 409, label: 'request_envelope_changed' });
      expect(await handles()).toBe(before);
      const ok = await post(target, `${head}}`);
      expect(ok.status, ok.reply.error).toBe(200);
    },
  );
});

describe('request_id on an upload', () => {
  test(
    'the same request_id and body past the prefix replays the handle; one position changed deep past byte 16384 is request_id_conflict',
    covers('reason:request_id_conflict', 'field:Request.request_id'),
    async ({ cell, client, target, skip }) => {
      needsMotion({ skip }, target);
      const { s, hold } = await holdAll(cell, client);
      const n = 2000; // 40 to 100 KB of points by the axis count: the payload the request_id names is mostly past the prefix
      const body = (last: number[]) => {
        const pts = pointsText(hold, n);
        const lastPoint = `{"time_ns":${(n - 1) * 1_000_000},"position":[${last.map((q) => JSON.stringify(q)).join(',')}]}]`;
        const text = pts.slice(0, pts.lastIndexOf('{')) + lastPoint;
        return `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"request_id":"upload-retry","axis_mask":1,"points":${text}}`;
      };
      const first = body(hold);
      expect(enc.encode(first).length).toBeGreaterThan(2 * PREFIX);
      const a = await post(target, first);
      expect(a.status, a.reply.error).toBe(200);
      const again = await post(target, first);
      expect([again.status, again.reply.handle]).toEqual([200, a.reply.handle]);
      // The last point's first axis one micro-unit away: the same prefix, another payload.
      const moved = hold.slice();
      moved[0] = moved[0]! + 1e-6;
      const c = await post(target, body(moved));
      expect({ status: c.status, label: c.label }).toEqual({ status: 409, label: 'request_id_conflict' });
    },
  );
});

describe('body and point limits', () => {
  test(
    'a body declared one byte over 222516384 is refused 413 body_too_large without being read',
    covers('limit:prepare_trajectory_body_bytes', 'reason:body_too_large'),
    async ({ cell, client, target, skip }) => {
      needsMotion({ skip }, target);
      const { s, hold } = await holdAll(cell, client);
      const text = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"axis_mask":1,"points":${pointsText(hold, 2)}}`;
      const head = enc.encode(text);
      // Declare BODY_LIMIT + 1 bytes but send only the first part: a service that reads before it checks
      // the size would wait for the rest and the request would time out instead of answering.
      async function* partial(): AsyncIterable<Uint8Array> {
        yield head;
        await new Promise((r) => setTimeout(r, 30_000));
      }
      const r = await post(target, partial(), { 'content-length': String(BODY_LIMIT + 1) });
      expect(r.status).toBe(413);
      expect(r.label).toBe('body_too_large');
    },
  );

  test(
    'a body of exactly 222516384 bytes (trailing whitespace) is read to its end and prepared',
    covers('limit:prepare_trajectory_body_bytes'),
    async ({ cell, client, target, skip }) => {
      needsMotion({ skip }, target);
      const { s, hold } = await holdAll(cell, client);
      const text = enc.encode(`{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"axis_mask":1,"points":${pointsText(hold, 2)}}`);
      const CHUNK = 1 << 20;
      const spaces = new Uint8Array(CHUNK).fill(0x20);
      async function* body(): AsyncIterable<Uint8Array> {
        yield text;
        let left = BODY_LIMIT - text.length;
        while (left > 0) {
          const n = Math.min(CHUNK, left);
          yield n === CHUNK ? spaces : spaces.subarray(0, n);
          left -= n;
        }
      }
      const sent = performance.now();
      const r = await post(target, body(), { 'content-length': String(BODY_LIMIT) });
      expect(r.status, r.reply.error).toBe(200);
      expect(r.reply.handle).toBeGreaterThan(0n);
      // The run's upload_admission_max_body (harness/report/run-measurements.ts): first byte sent to the answer.
      measure('upload_admission', 'ms').record(Math.round(performance.now() - sent));
    },
  );

  test(
    '250000 points are prepared; 250001 are refused invalid_request_envelope',
    covers('limit:points_per_trajectory', 'profile:trajectory.point_rules'),
    async ({ cell, client, target, skip }) => {
      needsMotion({ skip }, target);
      // Build the large bodies before the grant: the renewals run on this process's event loop.
      const hold = await positions(client);
      const tail = async (n: number) => Buffer.concat([enc.encode(',"axis_mask":1,"points":'), await pointsBytes(hold, n), enc.encode('}')]);
      const at = await tail(250_000);
      const over = await tail(250_001);
      const s = await cell.hold({ requested_lease_ms: 2_000 });
      const head = enc.encode(`{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation}`);
      const join = (t: Uint8Array) => Buffer.concat([head, t]);
      const ok = await post(target, join(at));
      expect(ok.status, ok.reply.error).toBe(200);
      const refused = await post(target, join(over));
      expect(refused.status).toBe(409);
      expect(refused.label).toBe('invalid_request_envelope');
    },
  );
});

describe('one upload at a time', () => {
  test(
    'while one upload is being received a second is refused busy; the status keeps answering; when the first client goes away the slot is free again',
    covers('reason:busy', 'limit:upload_slots_per_kind'),
    async ({ cell, client, target, skip }) => {
      needsMotion({ skip }, target);
      const { s, hold } = await holdAll(cell, client);
      const small = `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"axis_mask":1,"points":${pointsText(hold, 2)}}`;
      const head = enc.encode(`{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${s.session}","generation":${s.generation},"axis_mask":1,"points":[`);
      /** An upload that sends its admitted prefix and then nothing until `stop`; resolves how it ended. */
      const trickling = () => {
        const agent = new Agent({ connect: { socketPath: target.address }, bodyTimeout: 60_000, headersTimeout: 60_000 });
        let stop!: () => void;
        const stopped = new Promise<void>((r) => (stop = r));
        async function* body(): AsyncIterable<Uint8Array> {
          yield head;
          yield enc.encode(' '.repeat(PREFIX)); // past the prefix: admitted, the slot is taken
          await stopped;
          throw new Error('client gave up');
        }
        const ended = request('http://localhost/v1/control', { method: 'POST', body: Readable.from(body()), dispatcher: agent, headers: { 'content-type': 'application/json', 'content-length': String(10_000_000) } }).then(
          async (r) => `answered ${r.statusCode} ${await r.body.text()}`,
          () => 'aborted',
        );
        let done = false;
        void ended.then(() => (done = true));
        return { stop, ended, agent, done: () => done };
      };
      let busy: Awaited<ReturnType<typeof post>> | undefined;
      for (let attempt = 1; attempt <= 10 && !busy; attempt++) {
        const first = trickling();
        try {
          await new Promise((r) => setTimeout(r, 50 * attempt)); // let its prefix reach admission
          if (first.done()) continue; // it lost a race with a previous attempt's cleanup: try again
          const second = await post(target, small);
          if (second.label === 'busy') busy = second;
          expect((await client.status()).status).toBe(200); // observations keep answering meanwhile
        } finally {
          first.stop();
          await first.ended;
          await first.agent.close();
        }
      }
      expect(busy?.status).toBe(409);
      expect(busy?.label).toBe('busy');
      // the slot is released when the first client goes away
      let third = await post(target, small);
      for (let i = 0; i < 50 && third.label === 'busy'; i++) {
        await new Promise((r) => setTimeout(r, 20));
        third = await post(target, small);
      }
      expect(third.status, third.reply.error).toBe(200);
    },
  );
});
