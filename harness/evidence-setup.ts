// Setup file of the conformance project (vitest.config.ts): around every conformance test, the
// evidence collector of harness/evidence.ts. Hooks of a setup file run around every test of every file:
// `beforeEach` before the test's fixtures start, `afterEach` after the test body and before its fixtures
// (cell, variants, clients) are torn down, so the telemetry of a variant's stack is still readable.
// A measurement outside its limit thrown from afterEach fails the test (FAIL, harness/measure.ts).

import * as allure from 'allure-js-commons';
import { appendFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { beginTest, failedTest, finishTest, leaveTest, type Collector } from './evidence.ts';
import { limitText } from './measure.ts';
import { exchangeObservers, type Exchange } from './clients/control.ts';

const collectors = new WeakMap<object, Collector>();

// HIL_EVIDENCE=0 turns collection off (what it costs is the run measurement evidence_collection).
const OFF = process.env.HIL_EVIDENCE === '0';

beforeEach(({ task, onTestFailed, onTestFinished }) => {
  if (OFF) return;
  const c = beginTest(task.fullName);
  collectors.set(task, c);
  // onTestFinished runs before onTestFailed: a failing test stays entered until its transcript is taken
  // (the stack's stderr reaches it from the fixtures' own onTestFailed, which run before this one).
  onTestFinished(({ task: t }) => {
    if (t.result?.state !== 'fail') leaveTest(c);
  });
  onTestFailed(async ({ task: t }) => {
    try {
      await failedTest(c, t.meta, t.result?.errors);
      const tr = t.meta.evidence?.transcript;
      if (tr) await allure.attachment('transcript', JSON.stringify(tr, null, 2), { contentType: 'application/json' });
    } finally {
      leaveTest(c);
    }
  });
});

afterEach(async ({ task }) => {
  const c = collectors.get(task);
  if (!c) return;
  try {
    await finishTest(c, task.meta);
  } finally {
    for (const m of task.meta.evidence?.measurements ?? []) {
      const v = `${m.value} ${m.unit}${m.limit ? `, limit ${limitText(m.limit)}` : ''}${m.outcome === 'fail' ? ' OUTSIDE' : ''}`;
      // Excluded from Allure's history id: a measured value differs from run to run, and with it in the id
      // every run's result would be a new test with no history.
      await Promise.resolve(allure.parameter(`${m.name}${m.axis ? ` ${m.axis}` : ''}`, v, { excluded: true })).catch(() => undefined);
    }
    const plots = task.meta.evidence?.plots;
    if (plots?.length) await Promise.resolve(allure.attachment('motion', JSON.stringify(plots), { contentType: 'application/json' })).catch(() => undefined);
  }
});

// HIL_CPU_TRACE=FILE (set by bench/cpu-classes.ts): one line when each test file begins and ends in this
// worker, so the benchmark can charge a worker's stacks' CPU time to the file they served; the end line
// carries the file's requests through ControlClient by method and path (the observer evidence.ts installs
// is wrapped, not replaced).
const TRACE_STATE = Symbol.for('cell-hil.cpu-trace');
const CPU_TRACE = process.env.HIL_CPU_TRACE;
if (CPU_TRACE) {
  // This setup file runs again for every file of the worker (isolate: false); the wrapper is installed once.
  const holder = globalThis as { [TRACE_STATE]?: { requests: Record<string, number> } };
  let state = holder[TRACE_STATE];
  if (!state) {
    const s: { requests: Record<string, number> } = (state = holder[TRACE_STATE] = { requests: {} });
    let after = exchangeObservers.after;
    Object.defineProperty(exchangeObservers, 'after', {
      get: () => (x: Exchange) => {
        const k = `${x.method} ${x.path.split('?')[0]}`;
        s.requests[k] = (s.requests[k] ?? 0) + 1;
        after?.(x);
      },
      set: (f: typeof after) => void (after = f),
    });
  }
  const traced = state;
  const mark = (kind: string, extra = '') => appendFileSync(CPU_TRACE, `${kind}\t${process.pid}\t${Date.now()}\t${expect.getState().testPath ?? ''}${extra}\n`);
  beforeAll(() => {
    traced.requests = {};
    mark('begin');
  });
  afterAll(() => mark('end', `\t${JSON.stringify(traced.requests)}`));
}
