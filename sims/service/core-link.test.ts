// The service's side of the core channel: a core that cannot start or that dies says why, and the
// reason reaches the caller (and through the service, its log and daemon_incarnation_changed).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { RecordingReader } from '../../drivers/replay/format.ts';
import { compileMachine } from '../config/compile.ts';
import type { CompiledMachine } from '../config/types.ts';
import { CoreLink, CoreUnavailable, incarnationFiles } from './core-link.ts';
import { ReplayedTiming } from './replay-timing.ts';

const MACHINE: CompiledMachine = {
  ...compileMachine(readFileSync(new URL('../../fixtures/machines/bench-two-axis.json', import.meta.url), 'utf8')).machine,
  dir: '',
};

test('a core whose driver cannot be had fails to start with the driver\'s own reason, not an exit code', async () => {
  // The replay driver without its recording: its factory refuses with its own reason (REPLAY_BAD_PARAMS).
  const link = new CoreLink(MACHINE, { driver: 'replay', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  const err = await link.start().then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CoreUnavailable);
  expect((err as Error).message).toBe('core failed: RecordingError: the replay driver needs params.file: the recording to play');
  expect(link.running).toBe(false);
});

test('a paced replay\'s core thread is kept for the next paced incarnation in the process (core-threads.ts); a thread of another clock, and one killed by a crash, never serve again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-core-link-'));
  const path = join(dir, 't.hilrec');
  const replayLink = (verdict: string) =>
    new CoreLink(MACHINE, { driver: 'replay', driverParams: { file: path, mode: 'strict' }, clock: { mode: 'recorded', steps: true }, captureRetentionMs: 0, replayPace: { verdictFile: join(dir, verdict) } }, new ReplayedTiming());
  try {
    const rec = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path } });
    await rec.start();
    const stepped = rec.threadId;
    await rec.step(3);
    await rec.shutdown();
    const a = replayLink('a.json');
    await a.start();
    const kept = a.threadId;
    expect(kept).not.toBe(stepped); // the stepped core's thread was not kept
    await a.step(3);
    await a.shutdown();
    const b = replayLink('b.json');
    await b.start();
    expect(b.threadId).toBe(kept);
    // A fresh incarnation in the kept thread: it replays the whole recording again, from its own verdict.
    await b.step(3);
    await b.shutdown();
    expect(JSON.parse(readFileSync(join(dir, 'b.json'), 'utf8'))).toMatchObject({ divergence: null, cycles: 3 });
    // A thread ended by force (what crash() does, here without the next incarnation a crash starts) is not
    // kept: the next incarnation runs in a new one.
    const c = replayLink('c.json');
    await c.start();
    expect(c.threadId).toBe(kept);
    await (c as unknown as { worker: { terminate(): Promise<void> } }).worker.terminate();
    const d = replayLink('d.json');
    await d.start();
    expect(d.threadId).not.toBe(kept);
    await d.shutdown();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a core that is killed is reported once as an exit with its reason, and a new incarnation can start', async () => {
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  await link.start();
  const first = link.incarnation;
  const exits: string[] = [];
  link.on('exit', (why: string) => {
    exits.push(why);
    void link.start();
  });
  const next = await link.crash();
  expect(exits).toHaveLength(1);
  expect(exits[0]).toMatch(/^core exited with code \d+$/);
  expect(next).not.toBe(first);
  // the stepped core answers a step, and reports its time after it
  const r = await link.step(5);
  expect(r.extra?.cycles).toBe(5n);
  await link.shutdown();
});

type Inner = { onMessage(m: unknown): void; port: { postMessage(m: unknown): void } };

/** A started link on a stepped core whose posts to the core are captured in `posted`; shut down after `fn`. */
async function withLink(fn: (link: CoreLink, inner: Inner, posted: unknown[], t: ReplayedTiming) => Promise<void>): Promise<void> {
  // The timing a paced replay's composition root gives the link (sims/main.ts): the link relays the cues to it.
  const t = new ReplayedTiming();
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 }, t);
  await link.start();
  // A stepped core publishes only in its steps: one step, so the link has a publication to serve reads from.
  await link.step(1);
  try {
    const inner = link as unknown as Inner;
    const posted: unknown[] = [];
    inner.port.postMessage = (m: unknown) => void posted.push(m);
    await fn(link, inner, posted, t);
  } finally {
    await link.shutdown();
  }
}

test('status reads on a paced replay: each read takes the next recorded publication cycle, waits (bounded) for a publication of that cycle, and is noted to the core', () =>
  withLink(async (link, inner, posted, t) => {
    // Not replaying: no recorded reads, nothing noted (the link does not record either).
    expect(t.nextStatusReadCycle()).toBeUndefined();
    t.took('status_read', 3n);
    expect(posted).toEqual([]);
    inner.onMessage({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], statusReads: [5n, 7n] });
    expect(t.nextStatusReadCycle()).toBe(5n);
    // Waits for a publication of at least cycle 5: an older one does not do, the right one ends the wait.
    const status = (cycle: bigint) => inner.onMessage({ t: 'status', status: { ...link.status!, cycle, now_ns: 1n } });
    status(4n);
    let done = false;
    const waiting = link.statusFrom(5n, 5_000).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 30));
    expect(done).toBe(false);
    status(5n);
    await waiting;
    expect(link.status!.cycle).toBe(5n);
    t.took('status_read', 5n);
    expect(posted).toEqual([{ tap: 'note', data: { t: 'status_read', cycle: '5', seen: link.outputsSeen } }]);
    expect(t.nextStatusReadCycle()).toBe(7n);
    expect(t.nextStatusReadCycle()).toBeUndefined();
    // Bounded: a publication that never comes ends the wait after the given time.
    expect(await link.statusFrom(1_000n, 60)).toBe(false);
    expect(link.status!.cycle).toBe(5n);
    // The bound runs from the last publication newer than the one before: a core that keeps advancing
    // towards the cycle (slowly, on a loaded host) is waited for past it; one that stands still is not.
    let ended: boolean | undefined;
    const slow = link.statusFrom(50n, 500).then((r) => (ended = r));
    const from = Date.now();
    for (let c = 6n; c < 50n && ended === undefined; c++) {
      await new Promise((r) => setTimeout(r, 20));
      status(c);
    }
    expect(ended).toBeUndefined(); // 44 publications at least 20 ms apart: past the 500 ms bound
    expect(Date.now() - from).toBeGreaterThan(500);
    status(50n);
    expect(await slow).toBe(true);
    const still = Date.now();
    const held = link.statusFrom(60n, 60);
    for (let k = 0; k < 5; k++) {
      await new Promise((r) => setTimeout(r, 25));
      status(50n); // a held core publishes its unchanged status
    }
    expect(await held).toBe(false);
    expect(Date.now() - still).toBeLessThan(1_000);
  }));

test('a prepare\'s wait for its receipt is a timed wait like a command\'s: on a replay it waits as long as the recorded one was answered in, and running out then is a lost hold', () =>
  withLink(async (link, inner, posted) => {
    inner.onMessage({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], coreWaits: [{ kind: 'cmd:prepare', outcome: 'ok' }] });
    const arrays = { timeNs: new BigInt64Array(2), position: new Float64Array(2), velocity: new Float64Array(2), hasVelocity: new Uint8Array(2), ioMask: new Uint32Array(2), ioValues: new Uint32Array(2) } as never;
    // The core never answers (its port is captured): with a 30 ms bound of its own the wait still runs on
    // (the recorded one was answered), so nothing has come back after 60 ms.
    let outcome: string | undefined;
    const waiting = link.prepare({ generation: 7n, handle: 3n, axisMask: 1, ...(arrays as object) } as never, undefined, undefined, 30).then(
      () => (outcome = 'answered'),
      (e: Error) => (outcome = e.message),
    );
    await new Promise((r) => setTimeout(r, 60));
    expect(outcome).toBeUndefined();
    const prepare = posted.find((m) => (m as { t?: string }).t === 'prepare') as { id: number };
    inner.onMessage({ t: 'reply', id: prepare.id, result: { Sequence: 1n, Handle: 3n, Generation: 7n, Operation: 13, Result: 2, Reason: 0, AxisMask: 1 } });
    await waiting;
    expect(outcome).toBe('answered');
    expect(posted.filter((m) => (m as { data?: { t?: string } }).data?.t === 'hold_lost')).toEqual([]);
  }));

test('a replayed wait for a fresh publication ends with the publication the recorded wait got, even one the link already has, and never an older one', () =>
  withLink(async (link, inner) => {
    const status = (cycle: bigint) => inner.onMessage({ t: 'status', status: { ...link.status!, cycle, now_ns: 1n } });
    inner.onMessage({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], coreWaits: [{ kind: 'status', outcome: 'ok', cycle: 125n }, { kind: 'status', outcome: 'ok', cycle: 140n }] });
    status(125n); // the replayed core published it before the live service began to wait
    const first = await link.nextStatus(1000);
    expect(first?.cycle).toBe(125n);
    let got: bigint | undefined;
    const second = link.nextStatus(1000).then((s) => (got = s?.cycle));
    status(130n); // older than the one the recorded wait got
    await new Promise((r) => setTimeout(r, 20));
    expect(got).toBeUndefined();
    status(140n);
    await second;
    expect(got).toBe(140n);
  }));

test('a status read served before the core published anything is no sync point on a replay (the recording could not note it): it takes no recorded read', () =>
  withLink(async (link, inner, posted, t) => {
    inner.onMessage({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], statusReads: [5n, 7n] });
    const published = link.status;
    link.status = undefined; // a stepped core before its first step
    expect(t.nextStatusReadCycle()).toBeUndefined();
    t.took('status_read', undefined); // the service notes the cycle of the publication it served: none
    expect(posted).toEqual([]); // what a recording notes of such a read: nothing
    link.status = published;
    expect(t.nextStatusReadCycle()).toBe(5n); // the first recorded read is the first read after a publication
  }));

test('the service\'s answers are noted only on a recorded or replayed run: operation, status and the leading label; renewals and jog updates never', () =>
  withLink(async (link, inner, posted, t) => {
    const refused = { status: 409, body: { operation: 'arm', error: 'not_ready: axis 2 is not enabled' } };
    t.took('http_reply', refused);
    expect(posted).toEqual([]); // a plain run notes nothing
    inner.onMessage({ tap: 'cue', clockNs: 1n, hostClock: false });
    t.took('http_reply', refused);
    t.took('http_reply', { status: 200, body: { operation: 'enable', data: {} } });
    t.took('http_reply', { status: 200, body: { operation: 'renew', data: {} } });
    t.took('http_reply', { status: 409, body: { operation: 'update_jog', error: 'fence: stale' } });
    expect(posted).toEqual([
      { tap: 'note', data: { t: 'http_reply', op: 'arm', status: 409, label: 'not_ready' } },
      { tap: 'note', data: { t: 'http_reply', op: 'enable', status: 200, label: '' } },
    ]);
  }));

test('a recording that notes every status read (header status_reads "all"): a live read before any publication takes the next recorded read, and waits for its publication when that one had one (a restarted core, held for the acquire, not yet published), or is served at once when it had none', () =>
  withLink(async (link, inner, posted, t) => {
    // Recorded: read 1 before any publication (-1), read 2 from publication 5.
    inner.onMessage({ tap: 'cue', clockNs: 1n, hostClock: true, fences: [], statusReads: [-1n, 5n], statusReadsAll: true });
    const published = link.status;
    link.status = undefined;
    expect(t.turn('status_read')).toBeNull(); // read 1: served now, as recorded
    t.took('status_read', undefined);
    expect(posted).toEqual([{ tap: 'note', data: { t: 'status_read', cycle: 'none', seen: link.outputsSeen } }]); // the pacer's hold is served
    // Read 2 comes while the link still has no publication: under the old guess it was no sync point and was
    // served with no core status (Status core null); here it waits for publication 5.
    const turn = t.turn('status_read');
    expect(turn).not.toBeNull();
    let served = false;
    void turn!.then(() => (served = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(served).toBe(false);
    inner.onMessage({ t: 'status', status: { ...published!, cycle: 5n } });
    await turn;
    expect(served).toBe(true);
  }));

test('status reads on a replay show the live host clock, not the clock the recorded reads showed (docs/recording.md "Two clocks")', () =>
  withLink(async (link, inner, _posted, t) => {
    inner.onMessage({ tap: 'cue', clockNs: 1_000n, hostClock: false, fences: [], statusReads: [5n, 7n] });
    expect(t.nextStatusReadCycle()).toBe(5n);
    const before = process.hrtime.bigint();
    const now = link.serviceNow();
    expect(now >= before && now <= process.hrtime.bigint()).toBe(true);
  }));

test('a core restart records (or replays) the next incarnation in a file of its own, and a crash writes the recording out first', async () => {
  expect(incarnationFiles({ record: { path: '/r/t.hilrec', run: 'x' } }, 1)).toEqual({});
  expect(incarnationFiles({ record: { path: '/r/t.hilrec', run: 'x' } }, 2)).toEqual({ record: { path: '/r/t.core-2.hilrec', run: 'x' } });
  expect(incarnationFiles({ driverParams: { file: '/r/t.hilrec', mode: 'strict' }, replayPace: { verdictFile: '/v/verdict.json', speed: 1 } }, 3)).toEqual({
    driverParams: { file: '/r/t.core-3.hilrec', mode: 'strict' },
    replayPace: { verdictFile: '/v/verdict.core-3.json', speed: 1 },
  });
  const dir = mkdtempSync(join(tmpdir(), 'hil-core-link-'));
  const path = join(dir, 't.hilrec');
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path } });
  link.on('exit', () => void link.start());
  try {
    await link.start();
    await link.step(5);
    // Five cycles are far fewer than a block (250): without writing them out first, the crash would lose them all.
    await link.crash();
    await link.step(3);
  } finally {
    await link.shutdown();
  }
  const frames = (file: string) => {
    const r = RecordingReader.open(file);
    while (r.next()) r.takeNotes();
    return r.frame;
  };
  try {
    expect(frames(path)).toBe(5);
    expect(frames(join(dir, 't.core-2.hilrec'))).toBe(3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('each core incarnation of a replay cues the service afresh: status reads start again from the new recording\'s list', () =>
  withLink(async (link, inner, _posted, t) => {
    inner.onMessage({ tap: 'cue', clockNs: 1n, hostClock: false, fences: [], statusReads: [5n, 7n] });
    expect(t.nextStatusReadCycle()).toBe(5n);
    inner.onMessage({ tap: 'cue', clockNs: 2n, hostClock: false, fences: [], statusReads: [3n] });
    expect(t.nextStatusReadCycle()).toBe(3n);
    expect(t.nextStatusReadCycle()).toBeUndefined();
  }));

test('a paced replay\'s core is ready only once the pacer has cued the service: nothing the service serves of that incarnation goes unheld or unnoted', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-core-link-'));
  const path = join(dir, 't.hilrec');
  try {
    // A recorded session with the service's stamps (format 3): the core link stamps what it posts.
    const rec = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0, record: { path } });
    await rec.start();
    await rec.step(3);
    await rec.shutdown();
    const timing = new ReplayedTiming();
    const link = new CoreLink(MACHINE, { driver: 'replay', driverParams: { file: path, mode: 'strict' }, clock: { mode: 'recorded', steps: true }, captureRetentionMs: 0, replayPace: { verdictFile: join(dir, 'verdict.json') } }, timing);
    try {
      await link.start();
      // At once, before any other message of the core's is handled: an HTTP request can come right now.
      expect(timing.replaying).toBe(true);
    } finally {
      await link.shutdown();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('what the stepped core owes (CoreHost.owed, the test channel\'s /step waiting and /core-waits): a command it answers on receipt owes nothing, a Home owes its outcome until it is done', async () => {
  const link = new CoreLink(MACHINE, { driver: 'sim', clock: { mode: 'stepped' }, captureRetentionMs: 0 });
  await link.start();
  try {
    await link.step(20);
    expect(await link.owed()).toBe(0);
    link.post({ t: 'grant', generation: 1n, deadlineNs: process.hrtime.bigint() + 60_000_000_000n, active: true, axisMask: 3 });
    // enable is answered on receipt, between steps: nothing owed, and stepping would not change that.
    expect((await link.command('enable', 1n, 3)).result.Result).toBe(0);
    expect(await link.owed()).toBe(0);
    // Home: the receipt at once, its outcome after cycles: owed until home_done.
    expect((await link.command('home', 1n, 1)).result.Result).toBe(0);
    expect(await link.owed()).toBe(1);
    const r = await link.step(5);
    expect(r.extra).toMatchObject({ owed: 1 });
    const done = new Promise((res) => link.once('home_done', res));
    for (let i = 0; i < 400 && (await link.owed()) > 0; i++) await link.step(50);
    await done;
    expect(await link.owed()).toBe(0);
  } finally {
    await link.shutdown();
  }
});
