// The run's progress line: N of M files, tests passed and failed so far, time left from the sequencer's
// durations at the run's own pace; one line redrawn in a terminal, plain lines otherwise.

import { expect, test } from 'vitest';
import { Progress, isInteractive, formatLeft } from './progress.ts';

const durations = { 'a.test.ts': 10_000, 'b.test.ts': 30_000 };

test('plain lines: each file done prints N of M, the counts so far and the time left at the pace so far', () => {
  const out: string[] = [];
  let t = 0;
  const p = new Progress({ tty: false, write: (s) => out.push(s), now: () => t, durations });
  p.start(['a.test.ts', 'b.test.ts', 'c.test.ts']);
  expect(out).toEqual([]);
  expect(p.text()).toBe('0 of 3 files, 0 passed, 0 failed, time left: estimating');
  p.testDone('passed');
  p.testDone('passed');
  p.testDone('failed');
  t = 20_000; // a (10 s of weight) took 20 s: half the sequencer's pace; b (30 s) and c (unlisted, 1.5 s) remain
  p.fileDone('a.test.ts');
  expect(out).toEqual(['progress: 1 of 3 files, 2 passed, 1 failed, about 1 min 03 s left\n']);
  t = 80_000;
  p.fileDone('b.test.ts');
  expect(out[1]).toBe('progress: 2 of 3 files, 2 passed, 1 failed, about 3 s left\n');
  p.fileDone('c.test.ts');
  expect(out[2]).toBe('progress: 3 of 3 files, 2 passed, 1 failed, done\n');
  // print() passes other reporters' lines through untouched.
  p.print('ok  a.test.ts\n');
  expect(out[3]).toBe('ok  a.test.ts\n');
});

test('files running side by side: the time left lays the files out on the workers seen, at the pace of the files done', () => {
  const out: string[] = [];
  let t = 0;
  const d = { 'a.test.ts': 2_000, 'b.test.ts': 10_000, 'c.test.ts': 10_000, 'd.test.ts': 6_000, 'e.test.ts': 4_000 };
  const p = new Progress({ tty: false, write: (s) => out.push(s), now: () => t, durations: d });
  // Through the reporter's hooks, as vitest calls them: a file is queued when a worker takes it.
  p.onInit({ config: { root: '/r' } } as never);
  p.start(['a.test.ts', 'b.test.ts', 'c.test.ts', 'd.test.ts', 'e.test.ts']);
  for (const f of ['a', 'b', 'c']) p.onTestModuleQueued({ moduleId: `/r/${f}.test.ts` } as never);
  t = 2_000;
  p.onTestModuleEnd({ moduleId: '/r/a.test.ts' } as never);
  // a took its listed 2 s (pace 1, the prior's too). Three workers: b and c have 8 s left each; d (6 s) goes to the free
  // worker and e (4 s) after it there: 10 s. Counting the workers as one would have said 2 s x 30/2 = 30 s.
  expect(out.at(-1)).toBe('progress: 1 of 5 files, 0 passed, 0 failed, about 10 s left\n');
  p.fileStarted('d.test.ts');
  t = 12_000;
  p.fileDone('b.test.ts');
  // b took 12 s for its 10: with the 10 s counted at the listed pace (PACE_PRIOR_MS) the pace is 24 s per 22
  // listed. c and d are past their scaled durations (nothing left counted), e's 4 s becomes 4.4 s on the
  // first free worker. Without the prior b alone would set the pace: 4 x 14/12 = 4.7 s.
  expect(out.at(-1)).toBe('progress: 2 of 5 files, 0 passed, 0 failed, about 4 s left\n');
  p.fileStarted('e.test.ts');
  t = 13_000;
  p.fileDone('c.test.ts');
  p.fileDone('d.test.ts');
  // Only e runs, started 1 s ago, at the pace of the four done and the prior (48 s for 38 listed): 4 x 48/38 - 1 = 4.1 s.
  expect(p.left()).toBe('about 4 s left');
  p.fileDone('e.test.ts');
  expect(p.left()).toBe('done');
});

test('unlisted files do not set the pace: their weight is a guess, so a slow one leaves the listed pace as it was', () => {
  const out: string[] = [];
  let t = 0;
  const d = { 'listed.test.ts': 6_000 };
  const p = new Progress({ tty: false, write: (s) => out.push(s), now: () => t, durations: d });
  p.start(['u1.test.ts', 'u2.test.ts', 'u3.test.ts', 'listed.test.ts']);
  p.fileStarted('u1.test.ts');
  t = 14_000;
  p.fileDone('u1.test.ts');
  // u1 (unlisted, 1.5 s) took 14 s: the pace stays 1. One worker seen: u2 and u3 at 1.5 s, listed at 6 s: 9 s.
  // Taken as a pace (14/1.5 with the prior: 24/11.5) it would have said 9 x 2.1 = 19 s.
  expect(out.at(-1)).toBe('progress: 1 of 4 files, 0 passed, 0 failed, about 9 s left\n');
  p.fileStarted('listed.test.ts');
  t = 26_000;
  p.fileDone('listed.test.ts');
  // The listed file took 12 s for its 6: with the prior, 22 s per 16 listed: the two unlisted 1.5 s each at that pace, 4.1 s.
  expect(out.at(-1)).toBe('progress: 2 of 4 files, 0 passed, 0 failed, about 4 s left\n');
});

test('a running file is given at least its listed time even when the run goes faster than the list: the long files mostly wait out documented timeouts, which a faster host does not shorten', () => {
  let t = 0;
  const d = { 'long.test.ts': 30_000, 's1.test.ts': 10_000, 's2.test.ts': 10_000, 's3.test.ts': 10_000 };
  const p = new Progress({ tty: false, write: () => {}, now: () => t, durations: d });
  p.start(Object.keys(d));
  p.fileStarted('long.test.ts');
  p.fileStarted('s1.test.ts');
  t = 5_000;
  p.fileDone('s1.test.ts');
  p.fileStarted('s2.test.ts');
  t = 10_000;
  p.fileDone('s2.test.ts');
  p.fileStarted('s3.test.ts');
  t = 20_000;
  // The run's pace: s1 and s2 took 5 s each for 10 listed, with the 10 s prior (5 + 5 + 10) / (10 + 10 + 10) = 2/3.
  // long has run 20 s of its listed 30: 10 s left. At the run's pace (30 x 2/3 = 20 s) it would be taken as
  // ending now, and s3 (10 x 2/3, started 10 s ago) too: "about 1 s left" while long waits 10 s more.
  expect(p.left()).toBe('about 10 s left');
  p.fileDone('s3.test.ts');
  t = 26_000;
  expect(p.left()).toBe('about 4 s left');
});

test('a terminal gets one line redrawn in place; lines of other reporters go above it; the end clears it', () => {
  const out: string[] = [];
  let t = 0;
  const p = new Progress({ tty: true, write: (s) => out.push(s), now: () => t, durations, columns: 200 });
  p.start(['a.test.ts', 'b.test.ts']);
  expect(out.at(-1)).toBe('\r\x1b[Kprogress: 0 of 2 files, 0 passed, 0 failed, time left: estimating');
  p.testDone('passed');
  expect(out.at(-1)).toBe('\r\x1b[Kprogress: 0 of 2 files, 1 passed, 0 failed, time left: estimating');
  t = 5_000;
  p.fileDone('a.test.ts');
  expect(out.at(-1)).toBe('\r\x1b[Kprogress: 1 of 2 files, 1 passed, 0 failed, about 15 s left');
  expect(out.join('')).not.toContain('\n');
  const n = out.length;
  p.print('ok  a.test.ts   1 passed\n');
  expect(out.slice(n)).toEqual(['\r\x1b[Kok  a.test.ts   1 passed\n', 'progress: 1 of 2 files, 1 passed, 0 failed, about 15 s left']);
  // The last file done: the next line clears the progress line for good (the summary is not interleaved).
  t = 6_000;
  p.fileDone('b.test.ts');
  expect(out.at(-1)).toBe('\r\x1b[Kprogress: 2 of 2 files, 1 passed, 0 failed, done');
  const m = out.length;
  p.print('target sim\n');
  p.print('verdict: PASS\n');
  expect(out.slice(m)).toEqual(['\r\x1b[Ktarget sim\n', 'verdict: PASS\n']);
  p.onTestRunEnd();
  expect(out.length).toBe(m + 2);
});

test('a narrow terminal gets the line cut to its width, never wrapped', () => {
  const out: string[] = [];
  const p = new Progress({ tty: true, write: (s) => out.push(s), now: () => 0, durations, columns: 30 });
  p.start(['a.test.ts']);
  expect(out.at(-1)).toBe(`\r\x1b[K${'progress: 0 of 1 files, 0 passed, 0 failed'.slice(0, 29)}`);
});

test('interactive only on a terminal without CI', () => {
  expect(isInteractive({ isTTY: true }, {})).toBe(true);
  expect(isInteractive({ isTTY: true }, { CI: 'true' })).toBe(false);
  expect(isInteractive({ isTTY: true }, { CI: 'false' })).toBe(true);
  expect(isInteractive({ isTTY: false }, {})).toBe(false);
  expect(isInteractive({}, {})).toBe(false);
  expect(formatLeft(400)).toBe('1 s');
  expect(formatLeft(61_000)).toBe('1 min 01 s');
});

test('interrupted: files done of the selection, the counts, the files cut short, and that nothing else was written; in a terminal the redrawn line is cleared first', () => {
  let t = 0;
  const plain: string[] = [];
  const p = new Progress({ tty: false, write: (s) => plain.push(s), now: () => t, durations: {} });
  p.start(['a.test.ts', 'b.test.ts', 'c.test.ts']);
  p.fileStarted('a.test.ts');
  p.fileStarted('b.test.ts');
  p.testDone('passed');
  p.testDone('failed');
  t = 1000;
  p.fileDone('a.test.ts');
  p.interrupted('SIGINT');
  expect(plain.at(-1)).toBe('interrupted (SIGINT): 1 of 3 files done, 1 passed, 1 failed; cut short: b.test.ts; no verdict, run record or report was written\n');
  const tty: string[] = [];
  const q = new Progress({ tty: true, write: (s) => tty.push(s), now: () => t, durations: {} });
  q.start(['a.test.ts']);
  q.fileStarted('a.test.ts');
  q.testDone('errored');
  q.interrupted('SIGTERM');
  expect(tty.slice(-2)).toEqual(['\r\x1b[K', 'interrupted (SIGTERM): 0 of 1 files done, 0 passed, 0 failed, 1 errored; cut short: a.test.ts; no verdict, run record or report was written\n']);
});
