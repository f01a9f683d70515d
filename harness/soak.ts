// The nightly soak (`hil nightly`): hold the grant with renewals, follow telemetry and events
// for a while, and measure what a long run shows and a conformance run does not: missed renewals,
// telemetry drops and gaps, events lost, and the stack's resident memory over time (where the target
// tells its process). The figures are measurements with limits like a test's (harness/measure.ts).

import { readFileSync, writeFileSync } from 'node:fs';
import { Cell } from './clients/cell.ts';
import { epochNow, judgeRenewals, type RenewalRecord } from './clients/keeper.ts';
import type { ControlClient } from './clients/control.ts';
import { parseExact, stringifyExact, type JsonExact } from './oracle/json.ts';
import type { RunRecord } from './report/run-types.ts';
import type { Limit, MeasurementRecord } from './measure.ts';
import { withinLimit } from './measure.ts';
import { WindowBuilder } from './motion.ts';
import type { Target } from './targets/types.ts';

export interface SoakResult {
  seconds: number;
  measurements: MeasurementRecord[];
  /** The first renewal refused: seconds into the soak, status, the error text. */
  first_refusal?: { at_s: number; status: number; error: string };
  /** The refusals were the host's doing (the renewal left late or took longer than the lease to answer). */
  host_too_slow?: string;
}

/** Resident memory growth over the soak the nightly allows by default, MiB (hil nightly --soak-rss-growth-mib). */
export const DEFAULT_RSS_GROWTH_MIB = 64;

const RENEW_LIMIT: Limit = { kind: 'equals', lo: 0, source: 'documented', ref: 'document 1 part 3: a renewed grant stays owned' };
const GAPS_LIMIT: Limit = { kind: 'equals', lo: 0, source: 'documented', ref: 'document 1 part 4: a non-empty batch has contiguous sequences' };

export async function soak(target: Target, binding: ConstructorParameters<typeof Cell>[1], ms: number, o: { rssGrowthMiB?: number } = {}): Promise<SoakResult> {
  const client = target.client();
  const cell = new Cell(client, binding);
  const renewLog: RenewalRecord[] = [];
  let firstRefusal: SoakResult['first_refusal'];
  let renewals = 0;
  let refused = 0;
  let late = 0;
  let maxRenewMs = 0;
  let telemetryCursor = await newest(client);
  let dropped = 0;
  let gaps = 0;
  let records = 0;
  let eventCursor = (await events(client, 0n)).latest;
  let eventsSeen = 0;
  let eventsLost = 0;
  const rss: number[] = [];
  // The grant is taken once the cursors are read, so that its first renewal is due a third of a lease later.
  const acquireSent = epochNow();
  const s = await cell.grant({ requested_lease_ms: 2_000 });
  const lease = Number(s.grant.lease_ms);
  const started = performance.now();
  let nextRenew = started;
  try {
    while (performance.now() - started < ms) {
      const now = performance.now();
      if (now >= nextRenew) {
        const t0 = performance.now();
        const sent = epochNow();
        const r = await cell.fenced('renew', s);
        const took = performance.now() - t0;
        renewals++;
        maxRenewMs = Math.max(maxRenewMs, took);
        renewLog.push({ due: sent - (now - nextRenew), sent, answered: sent + took, status: r.status, label: r.label ?? '', error: r.reply.error ?? '' });
        if (r.status !== 200) {
          refused++;
          firstRefusal ??= { at_s: Math.round((performance.now() - started) / 100) / 10, status: r.status, error: r.reply.error ?? '' };
        } else if (took > lease / 3) late++;
        nextRenew = t0 + lease / 3;
      }
      const b = new WindowBuilder(4096);
      const poll = await client.raw('GET', `/v1/telemetry?after=${telemetryCursor}`);
      if (poll.status === 200) {
        const { last, count } = b.add(poll.body);
        telemetryCursor = last;
        records += count;
        dropped += b.dropped;
        gaps += b.gaps;
      }
      const e = await events(client, eventCursor);
      eventsSeen += e.count;
      eventsLost += e.dropped;
      eventCursor = e.next;
      const m = target.pid !== undefined ? residentKiB(target.pid) : undefined;
      if (m !== undefined) rss.push(m);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await cell.cleanup();
  }
  const out: MeasurementRecord[] = [];
  const add = (name: string, unit: string, value: number, limit?: Limit, note?: string) =>
    out.push({ name, unit, value, ...(limit ? { limit } : {}), outcome: limit ? (withinLimit(value, limit) ? 'pass' : 'fail') : 'unlimited', ...(note ? { note } : {}) });
  add('soak_renewals', 'requests', renewals, undefined, `every lease_ms/3 (${lease} ms lease)`);
  add('soak_renewals_refused', 'requests', refused, RENEW_LIMIT);
  add('soak_renewals_late', 'requests', late, undefined, `answered after a third of the lease`);
  add('soak_renew_max', 'ms', Math.round(maxRenewMs * 100) / 100);
  add('soak_telemetry_records', 'records', records);
  add('soak_telemetry_dropped', 'records', dropped);
  add('soak_telemetry_gaps', 'records', gaps, GAPS_LIMIT);
  add('soak_events', 'events', eventsSeen);
  add('soak_events_lost', 'events', eventsLost, undefined, 'events_dropped reported by the event log');
  if (rss.length >= 2) {
    add('soak_rss_start', 'KiB', rss[0]!);
    add('soak_rss_end', 'KiB', rss[rss.length - 1]!);
    add('soak_rss_max', 'KiB', Math.max(...rss));
    // Memory against a limit: a stack that grows while it only renews and is observed leaks.
    const growth = o.rssGrowthMiB ?? DEFAULT_RSS_GROWTH_MIB;
    add('soak_rss_growth', 'KiB', rss[rss.length - 1]! - rss[0]!, { kind: 'at_most', hi: growth * 1024, source: 'configured', ref: `hil nightly --soak-rss-growth-mib (${growth} MiB)` });
  }
  // Whose doing a refusal was (harness/clients/keeper.ts): the first refusal after renewals the harness
  // provably sent in time is the target's; otherwise the soak says nothing about the target.
  const loss = judgeRenewals(acquireSent, lease, renewLog);
  return {
    seconds: Math.round((performance.now() - started) / 100) / 10,
    measurements: out,
    ...(firstRefusal ? { first_refusal: firstRefusal } : {}),
    ...(loss && !loss.target ? { host_too_slow: loss.text } : {}),
  };
}

async function newest(client: ControlClient): Promise<bigint> {
  let after = 0n;
  for (;;) {
    const r = await client.raw('GET', `/v1/telemetry?after=${after}`);
    if (r.status !== 200) return after;
    const b = new WindowBuilder(0);
    const { last, count } = b.add(r.body);
    if (count < 4096) return last;
    after = last;
  }
}

async function events(client: ControlClient, after: bigint): Promise<{ count: number; dropped: number; next: bigint; latest: bigint }> {
  const r = await client.raw('GET', `/v1/events?after=${after}`);
  if (r.status !== 200) return { count: 0, dropped: 0, next: after, latest: after };
  const d = (parseExact(r.body) as { data: { events: { type: string; dropped?: bigint }[]; next_sequence: bigint; latest_sequence: bigint } }).data;
  const dropped = d.events.filter((e) => e.type === 'events_dropped').reduce((n, e) => n + Number(e.dropped ?? 1n), 0);
  return { count: d.events.length, dropped, next: d.next_sequence, latest: d.latest_sequence };
}

function residentKiB(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The nightly's additions to its run's record: the soak, and the target's driver, Describe and digests
 * where the run noted none. Written back with exact integers (run.json keeps uint64 fields exact).
 */
export function noteSoak(file: string, soakRecord: SoakResult | undefined, seen: { driver: string; describe: unknown } | undefined): void {
  const rec = parseExact(readFileSync(file)) as unknown as RunRecord;
  if (soakRecord) rec.soak = soakRecord;
  if (seen && rec.target.describe === undefined) {
    const d = seen.describe as Record<string, unknown>;
    rec.target = { ...rec.target, driver: rec.target.driver === 'unknown' ? seen.driver : rec.target.driver, describe: seen.describe, simulated: typeof d.simulated === 'boolean' ? d.simulated : rec.target.simulated };
    for (const k of ['machine_sha256', 'configuration_sha256', 'deployment_sha256'] as const) if (!rec.environment[k] && typeof d[k] === 'string') rec.environment[k] = d[k] as string;
  }
  writeFileSync(file, stringifyExact(rec as unknown as JsonExact));
}
