// settle (harness/clients/stepped.ts) steps the stepped clock until a request is answered; a replay matches
// the test's steps one by one with the recorded ones (docs/recording.md "The stepped clock"), so how many it
// sends must follow from what the core and the service did, not from how fast the service answered. A fake
// target: its steps answer at once, the service's answer comes when the test lets it.

import { describe, expect, test } from 'vitest';
import { settle } from './stepped.ts';
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
