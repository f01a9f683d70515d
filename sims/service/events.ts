// The event log (document 1 part 6): a ring of the last 256 events, sequences increasing by one within an
// adapter incarnation, a synthetic events_dropped record for cursors older than the ring.

import { EventEmitter } from 'node:events';
import { refuse } from './envelope.ts';

export const EVENT_RING = 256;
export const EVENTS_PER_POLL = 64;

export interface EventRecord {
  sequence: bigint;
  time_ns: bigint;
  type: string;
  daemon_incarnation: string;
  adapter_incarnation: string;
  [payload: string]: unknown;
}

/** Payload field name per event type (document 1 part 6 table). */
export const EVENT_PAYLOAD: Record<string, string> = {
  grant_acquired: 'grant',
  grant_renewed: 'grant',
  grant_released: 'grant',
  grant_expired: 'grant',
  grant_revoked: 'grant',
  enable_changed: 'enable',
  arm_changed: 'enable',
  handle_transition: 'handle',
  execution_started: 'execution',
  execution_completed: 'execution',
  execution_aborted: 'execution',
  execution_faulted: 'execution',
  jog_begin: 'jog',
  jog_end: 'jog',
  jog_expired: 'jog',
  jog_ramping: 'jog',
  jog_limited: 'jog',
  fault_latched: 'fault',
  fault_cleared: 'fault',
  home_epoch_changed: 'epoch',
  daemon_incarnation_changed: 'incarnation',
  adapter_incarnation_changed: 'incarnation',
  publisher_overflow: 'overflow',
  events_dropped: 'events_dropped',
  telemetry_mark: 'mark',
};

export class EventLog extends EventEmitter {
  private ring: EventRecord[] = [];
  private latest = 0n;

  constructor(
    readonly adapterIncarnation: string,
    private daemonIncarnation: () => string,
    private readonly clock: () => bigint,
  ) {
    super();
  }

  get latestSequence(): bigint {
    return this.latest;
  }

  publish(type: string, payload: unknown): EventRecord {
    const field = EVENT_PAYLOAD[type];
    if (!field) throw new Error(`unknown event type ${type}`);
    const rec: EventRecord = {
      sequence: ++this.latest,
      time_ns: this.clock(),
      type,
      daemon_incarnation: this.daemonIncarnation(),
      adapter_incarnation: this.adapterIncarnation,
      [field]: payload,
    };
    this.ring.push(rec);
    if (this.ring.length > EVENT_RING) this.ring.shift();
    this.emit('event', rec);
    return rec;
  }

  /** Parse the `after` query value: one unsigned decimal number (absent means 0). */
  static cursor(raw: string | null): bigint {
    if (raw === null || raw === '') return 0n;
    if (!/^(0|[1-9][0-9]{0,19})$/.test(raw)) throw refuse('invalid_event_cursor', 'after must be one unsigned decimal number');
    const v = BigInt(raw);
    if (v > (1n << 64n) - 1n) throw refuse('invalid_event_cursor', 'after exceeds uint64');
    return v;
  }

  /** Events after `after`, at most `limit`, with a synthetic events_dropped first when history was lost. */
  read(after: bigint, limit = EVENTS_PER_POLL): EventRecord[] {
    if (after > this.latest) throw refuse('event_cursor_ahead', `after ${after} is newer than ${this.latest}`);
    const oldest = this.ring.length ? this.ring[0]!.sequence : this.latest + 1n;
    const out: EventRecord[] = [];
    let from = after + 1n;
    if (after !== 0n && from < oldest) {
      out.push({
        sequence: oldest - 1n,
        time_ns: this.clock(),
        type: 'events_dropped',
        daemon_incarnation: this.daemonIncarnation(),
        adapter_incarnation: this.adapterIncarnation,
        events_dropped: { first_lost_sequence: from, last_lost_sequence: oldest - 1n },
      });
      from = oldest;
    }
    for (const e of this.ring) {
      if (out.length >= limit) break;
      if (e.sequence >= from) out.push(e);
    }
    return out;
  }
}
