// Event log client (document 1 part 6): poll GET /v1/events?after=<sequence>.

import { isJsonObject, type JsonExact } from '../oracle/json.ts';
import type { ControlClient } from './control.ts';

export interface CellEvent {
  sequence: bigint;
  time_ns: bigint;
  type: string;
  daemon_incarnation: string;
  adapter_incarnation: string;
  [payload: string]: JsonExact | undefined;
}

export interface EventBatch {
  events: CellEvent[];
  next_sequence: bigint;
  latest_sequence: bigint;
}

/** One poll; throws when the service refuses (callers asserting refusals use client.get directly). */
export async function pollEvents(client: ControlClient, after: bigint): Promise<EventBatch> {
  const r = await client.get(`/v1/events?after=${after}`, 'subscribe_events');
  if (r.status !== 200) throw new Error(`events poll refused: ${r.status} ${r.reply.error}`);
  const d = r.reply.data;
  if (!isJsonObject(d) || !Array.isArray(d.events)) throw new Error('EventBatch without an events array');
  return d as unknown as EventBatch;
}

/** The newest sequence now (a cursor for "events from here on"). */
export async function eventCursor(client: ControlClient): Promise<bigint> {
  return (await pollEvents(client, 0n)).latest_sequence;
}

/** Poll until an event matching `pred` appears after `after` or the deadline passes. */
export async function waitForEvent(
  client: ControlClient,
  after: bigint,
  pred: (e: CellEvent) => boolean,
  timeoutMs = 3_000,
): Promise<CellEvent | undefined> {
  const until = Date.now() + timeoutMs;
  let cursor = after;
  for (;;) {
    const b = await pollEvents(client, cursor);
    const hit = b.events.find(pred);
    if (hit) return hit;
    if (b.events.length) cursor = b.next_sequence;
    if (Date.now() > until) return undefined;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** All events after `after` (following next_sequence until caught up). */
export async function eventsSince(client: ControlClient, after: bigint): Promise<CellEvent[]> {
  const out: CellEvent[] = [];
  let cursor = after;
  for (let i = 0; i < 64; i++) {
    const b = await pollEvents(client, cursor);
    out.push(...b.events);
    if (!b.events.length || b.next_sequence >= b.latest_sequence) break;
    cursor = b.next_sequence;
  }
  return out;
}
