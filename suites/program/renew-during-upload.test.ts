// A grant renewed at a steady cadence while a large program is admitted keeps being answered within its
// lease (document 1 part 3: "owned, renew, fence valid and lease not expired -> owned"; part 4
// prepare_program, part 8 limits: a program body is at most 39298580 bytes). A service that admits the
// program on the thread that answers renewals holds every renewal sent meanwhile until the admission ends:
// the controller sees no answer within its lease and must treat the grant as lost, though the documents
// allow both the upload and the renewals.
//
// The renewals go from the harness's keeper thread (harness/clients/keeper.ts), each recorded with when it
// was due, sent and answered (`offence` below). A renewal refused although sent within the lease of the
// last accepted one, or accepted but answered more than lease_ms after it was sent, fails the target,
// unless the host was late by what would explain it (the harness's test loop stalled, the keeper thread
// sent a renewal late while no reply was outstanding, or, where the target is a process on this host, the
// host kept it waiting to run): then the outcome is ERROR HIL_ERR_HOST_TOO_SLOW with the figures
// (harness/lateness.ts hostBound). The keeper's first exchanges go to a grant of its own first.

import { HarnessError } from '../../harness/errors.ts';
import { epochNow, judgeRenewals, keepGrant, type RenewalRecord } from '../../harness/clients/keeper.ts';
import { covers, describe, expect, hostBound, test, type Description } from '../../harness/fixture.ts';
import { postProgram } from './upload.ts';
import { encodeProgram, move, nineColumnsUnfit, type ProgramFile } from './files.ts';

const Q0 = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
const Q1 = Q0.map((x) => x + 0.02);
/**
 * Samples per segment: two segments of 32000 are 64000 samples, 9.8 MB of dense file (153 bytes a sample,
 * document 2 part 2), a quarter of the largest program the documents allow: its live-machine checks alone
 * take 0.6 to 0.7 s of processor time (the reference service's, measured), so a service that runs them on
 * the thread that answers renewals holds one past a 500 ms lease even on a quiet host; small enough to
 * encode and upload in a few seconds.
 */
const PER_SEGMENT = 32_000;
/** Renewals answered before the upload starts (the keeper's warm-up, not judged). */
const WARM_UP = 3;
/** The LAN profile's lease (document 1 part 8); the cell may grant less (min of request and ceiling). */
const LEASE_MS = 500n;

const program = (d: Description): ProgramFile => ({
  segments: [move('out', Q0, Q1, PER_SEGMENT), move('back', Q1, Q0, PER_SEGMENT)],
  manifestRevision: d.binding.revision,
});

/**
 * The keeper thread's own lateness: how long after it was due a renewal left, not counting the time the
 * previous renewal was still waiting for its answer (the keeper sends one at a time, so a renewal the
 * target held makes the next one late by the target's doing).
 */
function keeperLateness(records: readonly RenewalRecord[]): number {
  let worst = 0;
  for (let i = 0; i < records.length; i++) {
    const free = Math.max(records[i]!.due, i > 0 ? records[i - 1]!.answered : -Infinity);
    worst = Math.max(worst, records[i]!.sent - free);
  }
  return worst;
}

/**
 * The first renewal that breaks the rule, with the harness's lateness that would
 * explain it (hostBound's margin):
 *   refused (expired or otherwise) although sent `gap` ms after the last accepted one (or the acquire): the
 *   service's deadline was no earlier than that send plus the lease, so the refusal says nothing only when
 *   the harness took more than lease - gap ms to put the renewal on the wire;
 *   accepted but answered `rtt` ms after it was sent, more than the lease: the harness's share of the round
 *   trip would have to be more than rtt - lease.
 * `since`: the epoch ms from which the harness's lateness bears on it (the send that set the deadline, or
 * the late renewal's own send).
 */
function offence(records: readonly RenewalRecord[], startSent: number, lease: number, from: number): { text: string; marginMs: number; since: number } | undefined {
  let last = startSent;
  for (const x of records) {
    const rtt = x.answered - x.sent;
    const f = (v: number) => Math.round(v * 10) / 10;
    const at = `renewal sent ${f(x.sent - from)} ms after the upload began, ${f(x.sent - last)} ms after the last accepted one, answered in ${f(rtt)} ms`;
    if (x.status !== 200) return { text: `${at}: refused ${x.status} ${x.error || x.label}`, marginMs: Math.max(0, lease - (x.sent - last)), since: last };
    if (rtt > lease) return { text: `${at}: accepted, but later than the lease`, marginMs: rtt - lease, since: x.sent };
    if (x.status === 200) last = x.sent;
  }
  return undefined;
}

describe('renewals during a program upload', () => {
  test(
    'every renewal sent while a 9.8 MB program is received and admitted is answered within the lease, and the program is admitted',
    { ...covers('transition:grant:owned->owned:renew', 'endpoint:POST /v1/program'), timeout: 60_000 },
    async ({ cell, client, description, skip }) => {
      const unfit = nineColumnsUnfit(description);
      if (unfit) skip(unfit);
      const f = program(description);
      const bytes = encodeProgram(f);
      // The keeper thread's first exchanges with a target (its HTTP client compiled, the connection opened,
      // a stack just started) are slow on a loaded host by nobody's fault the rule is about: they go to a
      // grant of the longest lease, released before the one under test is taken.
      const first = await cell.grant({ requested_lease_ms: 10_000n });
      const warming = keepGrant(client, first, first.grant.lease_ms, 20, epochNow(), { judgedByTest: true, inFlight: 1 });
      for (let i = 0; i < 500 && warming.records.length < WARM_UP; i++) await new Promise((res) => setTimeout(res, 20));
      warming.stop();
      await warming.settle();
      expect((await cell.fenced('release', first)).status).toBe(200);
      const startSent = epochNow();
      const s = await cell.grant({ requested_lease_ms: LEASE_MS });
      const lease = s.grant.lease_ms;
      // A fifth of the lease as a controller renews, at most 50 ms so that several renewals are sent while
      // even a quick service receives and admits the file; the first land before the upload starts.
      const every = Math.max(20, Math.min(50, Math.floor(lease / 5)));
      // One renewal at a time: keeperLateness counts the keeper's lateness from the previous answer.
      const kept = keepGrant(client, s, lease, every, startSent, { judgedByTest: true, inFlight: 1 });
      let r: Awaited<ReturnType<typeof postProgram>>;
      let from: number;
      let to: number;
      try {
        // Warm-up: the keeper thread's first exchanges on a new connection are slow on a loaded host (its
        // HTTP client compiled, the connection opened) by the harness's doing; they are not judged here.
        for (let i = 0; i < 400 && kept.records.length < WARM_UP; i++) await new Promise((res) => setTimeout(res, every));
        from = epochNow();
        r = await postProgram(client, s, bytes);
        to = epochNow();
        // One more period, so a renewal sent just before the admission ended is answered and recorded.
        await new Promise((res) => setTimeout(res, every));
      } finally {
        kept.stop();
        await kept.settle();
      }
      const warm = kept.records.slice(0, WARM_UP);
      const lost = judgeRenewals(startSent, lease, warm);
      if (warm.length < WARM_UP || lost || warm.some((x) => x.status !== 200)) {
        const why = `the grant keeper's first ${WARM_UP} renewals (before the upload): ${JSON.stringify(warm.map((x) => ({ sent_after_due_ms: Math.round(x.sent - x.due), rtt_ms: Math.round(x.answered - x.sent), status: x.status, label: x.label })))}`;
        if (lost?.target) expect.fail(`${lost.text}; ${why}`);
        throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `the grant was not kept up to the upload, so nothing was measured: ${lost?.text ?? why}`);
      }
      const bad = offence(kept.records.slice(WARM_UP), warm.at(-1)!.sent, lease, from);
      await hostBound(
        {
          rule: 'document 1 part 3: a renewal sent within its lease keeps the grant and is answered within it',
          marginMs: bad?.marginMs ?? lease,
          // A service kept off the CPU by the host admits late through no fault of its own (the sim
          // target's stack shares this host): its run-queue wait counts as the harness's lateness does.
          targetOnHost: true,
          // The harness's lateness from the send the offence is measured from (performance.now() time).
          since: performance.now() - (epochNow() - (bad?.since ?? startSent)),
          measured: () => ({ ms: keeperLateness(kept.records), what: 'the keeper thread sending a renewal after it was due with no reply outstanding' }),
        },
        async () => {
          expect(bad?.text, `lease ${lease} ms, renewals every ${every} ms`).toBeUndefined();
        },
      );
      // Nothing was measured when no renewal was in flight during the upload (the keeper thread sent none).
      const during = kept.records.filter((x) => x.answered >= from && x.sent <= to);
      if (during.length === 0) {
        throw new HarnessError('HIL_ERR_HOST_TOO_SLOW', `the keeper sent no renewal during the ${Math.round(to - from)} ms upload (one due every ${every} ms, worst lateness ${Math.round(keeperLateness(kept.records))} ms): nothing was measured`);
      }
      expect({ status: r!.status, error: r!.reply.error }).toEqual({ status: 200, error: undefined });
      expect((r!.reply.data as Record<string, unknown>).normalised_samples).toBe(BigInt(2 * PER_SEGMENT - 1));
    },
  );
});
