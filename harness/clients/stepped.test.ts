// settle (harness/clients/stepped.ts) steps the stepped clock until a request is answered; a replay matches
// the test's steps one by one with the recorded ones (docs/recording.md "The stepped clock"), so how many it
// sends must follow from what the core and the service did, not from how fast the service answered. A fake
// target: its steps answer at once, the service's answer comes when the test lets it.

import { describe, expect, test } from 'vitest';
import { driverOf, settle } from './stepped.ts';
import type { ControlClient } from './control.ts';
import type { StatusView } from './status.ts';
import type { StepReport, Target } from '../targets/types.ts';

/** A stepped target whose service waits on the core for `waiting()` requests; counts the steps it ran. */
function fakeTarget(o: { waiting: () => number; answered?: (step: number) => number; onStep?: (step: number) => void }) {
  let steps = 0;
  let cycles = 0n;
  const target = {
    name: 'fake',
    async stepReport(n: number): Promise<StepReport> {
      await new Promise((r) => setImmediate(r));
      steps++;
      cycles += BigInt(n);
      o.onStep?.(steps);
      return { nowNs: cycles * 1_000_000n, cycles, answered: o.answered?.(steps) ?? 0, waiting: o.waiting() };
    },
    async coreWaits(): Promise<number> {
      await new Promise((r) => setImmediate(r));
      return o.waiting();
    },
  } as unknown as Target;
  return { target, steps: () => steps };
}

/** A promise and its resolver. */
function later<T>(): { p: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const p = new Promise<T>((r) => (resolve = r));
  return { p, resolve };
}

describe('settle: as many steps whatever the service took to answer', () => {
  test('a request the service answers alone (a cleanup refused at the fence) is stepped once, however many steps its answer took to come', async () => {
    // Without the rule on the service's waits, the client stepped until the answer came: here, as many steps
    // as ran before the answer (the intents cleanup: one step more or fewer than recorded).
    const counts: number[] = [];
    for (const ms of [0, 10, 30]) {
      const answer = later<string>();
      const t = fakeTarget({ waiting: () => 0 });
      setTimeout(() => answer.resolve('409'), ms);
      expect(await settle(t.target, answer.p, 5)).toBe('409');
      counts.push(t.steps());
    }
    expect(counts).toEqual([1, 1, 1]);
  });

  test('a request that reaches the core after the first step is stepped once more than one that reached it before, never more (the core answers in its second step after the request arrived)', async () => {
    const run = async (arrivesAfterFirstStep: boolean) => {
      const answer = later<string>();
      /** The step at which the request reached the core (0: before the first). */
      let arrived: number | null = arrivesAfterFirstStep ? null : 0;
      let stepsRun = 0;
      let answered = false;
      const t = fakeTarget({
        waiting: () => (arrived !== null && !answered ? 1 : 0),
        answered: (k) => {
          if (arrived === null || answered || k < arrived + 2) return 0;
          answered = true;
          setTimeout(() => answer.resolve('200'), 1);
          return 1;
        },
        onStep: (k) => {
          stepsRun = k;
          // On its way to the core for a while after the first step's answer (a loaded service).
          if (k === 1 && arrivesAfterFirstStep) setTimeout(() => (arrived = stepsRun), 20);
        },
      });
      await settle(t.target, answer.p, 5);
      return t.steps();
    };
    // The old loop stepped on while the request was on its way: 3 plus as many as ran meanwhile.
    expect(await run(false)).toBe(2);
    expect(await run(true)).toBe(3);
  }, 5_000);

  test('a target that does not report the service waits steps on until the answer comes (as before)', async () => {
    const answer = later<string>();
    let steps = 0;
    const target = {
      name: 'old',
      async stepReport(n: number): Promise<StepReport> {
        await new Promise((r) => setImmediate(r));
        if (++steps === 3) answer.resolve('200');
        return { nowNs: 0n, cycles: BigInt(n * steps), answered: 0 };
      },
    } as unknown as Target;
    expect(await settle(target, answer.p, 5)).toBe('200');
    expect(steps).toBe(3);
  });
});

describe('driverOf: one test body for a stepped and a real-time cell', () => {
  /**
   * A cell whose status reads `n` (cycles run so far) and a target that steps it (when `stepping`); its event
   * log holds one event of each `events` entry once that many cycles have run (sequence: its place, from 1).
   */
  function cell(o: { clock?: string; cycleNs?: bigint; stepping: boolean; events?: Array<{ at: number; type: string }>; answered?: (cycles: number) => number }) {
    let cycles = 0;
    const afters: bigint[] = [];
    const sizes: number[] = [];
    const target = {
      name: 'fake',
      ...(o.stepping
        ? {
            async step(n: number) {
              sizes.push(n);
              cycles += n;
              return BigInt(cycles);
            },
            async stepReport(n: number): Promise<StepReport> {
              sizes.push(n);
              cycles += n;
              return { nowNs: BigInt(cycles), cycles: BigInt(cycles), answered: o.answered ? o.answered(cycles) : 1, waiting: 0 };
            },
          }
        : {}),
    } as unknown as Target;
    const log = () => (o.events ?? []).filter((e) => e.at <= cycles).map((e, i) => ({ sequence: BigInt(i + 1), type: e.type, at: e.at }));
    const client = {
      status: async () => ({ status: 200, reply: { data: { n: cycles } } }),
      async get(path: string) {
        const after = BigInt(/after=(\d+)/.exec(path)![1]!);
        afters.push(after);
        const all = log();
        const events = all.filter((e) => e.sequence > after);
        const latest = all.at(-1)?.sequence ?? 0n;
        return { status: 200, reply: { data: { events, next_sequence: events.at(-1)?.sequence ?? after, latest_sequence: latest } } };
      },
    } as unknown as ControlClient;
    const description = { ...(o.clock ? { clock: o.clock } : {}), ...(o.cycleNs ? { cycle_ns: o.cycleNs } : {}) };
    return { target, client, description, sizes, afters, cycles: () => cycles };
  }
  const n = (s: StatusView) => (s as unknown as { n: number }).n;

  test('a stepped cell is stepped a fiftieth of the budget (10 to 100 ms of its own time) at a time until the status holds', async () => {
    const c = cell({ clock: 'stepped', cycleNs: 2_000_000n, stepping: true });
    const d = driverOf(c.target, c.client, c.description);
    expect(d.stepped).toBe(true);
    const s = await d.status((x) => n(x) >= 23, 1_000);
    // 10 cycles (20 ms at 2 ms) a step: the first status with 23 or more cycles run is after 30.
    expect(n(s)).toBe(30);
    expect(c.sizes).toEqual([10, 10, 10]);
    // A wait of 20 s is read every 100 ms (50 cycles), not every 400 ms.
    c.sizes.length = 0;
    expect(n(await d.status((x) => n(x) >= 130, 20_000))).toBe(130);
    expect(c.sizes).toEqual([50, 50]);
  });

  test('its budget is cell time: the last status once that many cycles have run, however long the host took', async () => {
    const c = cell({ clock: 'stepped', cycleNs: 250_000n, stepping: true });
    const d = driverOf(c.target, c.client, c.description);
    // 30 ms at 250 us is 120 cycles, stepped 40 at a time; the predicate never holds.
    const s = await d.status(() => false, 30);
    expect({ last: n(s), sizes: c.sizes }).toEqual({ last: 120, sizes: [40, 40, 40] });
  });

  test('answer steps until the reply comes on a stepped cell, and only awaits it on a real-time one', async () => {
    const c = cell({ clock: 'stepped', stepping: true });
    const d = driverOf(c.target, c.client, c.description);
    let resolve!: (v: string) => void;
    const p = new Promise<string>((r) => (resolve = r));
    const q = d.answer(p, 7);
    await new Promise((r) => setTimeout(r, 5));
    resolve('ok');
    expect(await q).toBe('ok');
    expect(c.sizes.length).toBeGreaterThan(0);
    expect(new Set(c.sizes)).toEqual(new Set([7]));
    const rt = cell({ stepping: true });
    const r = driverOf(rt.target, rt.client, rt.description);
    expect(await r.answer(Promise.resolve('now'))).toBe('now');
    expect(rt.sizes).toEqual([]);
  });

  test('a cell is driven in real time unless its Describe says stepped and the target can step it', async () => {
    expect(driverOf(cell({ stepping: true }).target, cell({ stepping: true }).client, {}).stepped).toBe(false);
    expect(driverOf(cell({ stepping: true }).target, cell({ stepping: true }).client, { clock: 'realtime' }).stepped).toBe(false);
    const noStep = cell({ clock: 'stepped', stepping: false });
    expect(driverOf(noStep.target, noStep.client, noStep.description).stepped).toBe(false);
    // Real time: status polls the service until the predicate holds, no step is sent.
    const rt = cell({ stepping: true });
    const d = driverOf(rt.target, rt.client, rt.description);
    expect(n(await d.status((x) => n(x) === 0, 1_000))).toBe(0);
    expect(rt.sizes).toEqual([]);
  });

  test('event: a stepped cell is stepped as status is until the event is in its log, the log read on from where it was left', async () => {
    const c = cell({ clock: 'stepped', cycleNs: 2_000_000n, stepping: true, events: [{ at: 5, type: 'other' }, { at: 35, type: 'done' }, { at: 36, type: 'done' }] });
    const d = driverOf(c.target, c.client, c.description);
    const e = await d.event(0n, (x) => x.type === 'done', 1_000);
    // 10 cycles (20 ms at 2 ms) a step; the first 'done' is in the log after 40, the earlier event is read once.
    expect({ sequence: e?.sequence, sizes: c.sizes, afters: c.afters }).toEqual({ sequence: 2n, sizes: [10, 10, 10, 10], afters: [0n, 0n, 1n, 1n, 1n] });
  });

  test('event: its budget is cell time: undefined once that many cycles have run without the event', async () => {
    const c = cell({ clock: 'stepped', cycleNs: 250_000n, stepping: true, events: [{ at: 121, type: 'done' }] });
    const d = driverOf(c.target, c.client, c.description);
    // 30 ms at 250 us is 120 cycles, stepped 40 at a time: the event of cycle 121 is one cycle too late.
    expect(await d.event(0n, (x) => x.type === 'done', 30)).toBeUndefined();
    expect(c.sizes).toEqual([40, 40, 40]);
  });

  test('elapse runs the cycles of that much cell time on a stepped cell (rounded up), and steps nothing on a real-time one', async () => {
    const c = cell({ clock: 'stepped', cycleNs: 300_000n, stepping: true });
    await driverOf(c.target, c.client, c.description).elapse(50);
    expect(c.sizes).toEqual([167]);
    const rt = cell({ stepping: true, events: [{ at: 0, type: 'done' }] });
    const r = driverOf(rt.target, rt.client, rt.description);
    await r.elapse(1);
    // Real time: the log is polled (waitForEvent), no step is sent.
    expect((await r.event(0n, (x) => x.type === 'done', 1_000))?.sequence).toBe(1n);
    expect(rt.sizes).toEqual([]);
  });

  /** A reply '200' that each step of the fake cell may schedule: `when` returns how, or undefined for none yet. */
  function replyAfterStep(c: ReturnType<typeof cell>, when: (reply: () => void, report: StepReport) => (() => void) | undefined): Promise<string> {
    let resolve!: (v: string) => void;
    const p = new Promise<string>((r) => (resolve = r));
    const step = c.target.stepReport!.bind(c.target);
    c.target.stepReport = async (n: number) => {
      const report = await step(n);
      when(() => resolve('200'), report)?.();
      return report;
    };
    return p;
  }

  test('answerWithin steps a stepped cell until the reply comes, however many steps the service needed (a reply from a newer observation)', async () => {
    const c = cell({ clock: 'stepped', cycleNs: 1_000_000n, stepping: true, answered: () => 0 });
    const d = driverOf(c.target, c.client, c.description);
    // Answered once 45 cycles have run (as a service answers from the publication after the one it saw
    // first), with no answer of the core's meanwhile: 20 cycles (a fiftieth of 1 s) a step.
    const p = replyAfterStep(c, (r) => (c.cycles() >= 45 ? () => setImmediate(r) : undefined));
    expect(await d.answerWithin(p, 1_000)).toBe('200');
    expect(c.sizes).toEqual([20, 20, 20]);
  });

  test("answerWithin waits for the reply after the step that produced the core's answer (a Home's outcome), however late it comes through a loaded host, and steps no more", async () => {
    // The core answers in the cycles up to 40 (the second step); the reply reaches the harness 60 ms later.
    const c = cell({ clock: 'stepped', cycleNs: 1_000_000n, stepping: true, answered: (n) => (n === 40 ? 1 : 0) });
    const d = driverOf(c.target, c.client, c.description);
    const p = replyAfterStep(c, (r, report) => (report.answered > 0 ? () => setTimeout(r, 60) : undefined));
    expect(await d.answerWithin(p, 1_000)).toBe('200');
    expect(c.sizes).toEqual([20, 20]);
  });

  test('answerWithin stops stepping once its budget of cell time ran, then awaits the reply; a real-time cell is never stepped', async () => {
    const c = cell({ clock: 'stepped', cycleNs: 1_000_000n, stepping: true, answered: () => 0 });
    const d = driverOf(c.target, c.client, c.description);
    let resolve!: (v: string) => void;
    const p = new Promise<string>((r) => (resolve = r));
    const q = d.answerWithin(p, 100);
    await new Promise((r) => setTimeout(r, 100));
    // 100 ms of cell time, 10 cycles a step: no further step while the reply is awaited.
    expect(c.sizes).toEqual(Array(10).fill(10));
    resolve('late');
    expect(await q).toBe('late');
    const rt = cell({ stepping: true });
    expect(await driverOf(rt.target, rt.client, rt.description).answerWithin(Promise.resolve('now'), 1_000)).toBe('now');
    expect(rt.sizes).toEqual([]);
  });
});
