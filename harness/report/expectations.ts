// Expectations as data, the web-platform-tests habit (wptrunner's expectation metadata: per test, the
// set of outcomes allowed, with conditions on the product and its configuration). One file per target
// in fixtures/expectations/ (<target>.json, <target>+<driver>.json for the sim target on another bus
// driver, rig+<machine>.json for a rig), mapping the full test name ("<file> > <test>") to a rule, or to
// a list of rules of which the first whose conditions hold applies:
//
//   { "expected": ["FAIL"], "reason": "why this target cannot pass", "when": { "driver": "ethercat-fake" } }
//
// An outcome is PASS, FAIL, ERROR, TIMEOUT or SKIP. An outcome inside the rule's set is expected; an
// outcome outside it is unexpected and keeps its own class: an ERROR where FAIL was expected is an ERROR
// (the harness broke in that test, which says nothing of the known defect), and a PASS where only FAIL
// was allowed is an unexpected pass. A test without a rule (or with none whose conditions hold) allows
// PASS and SKIP, as before.
//
// `hil expectations update --target T` writes the outcome each test had into the file (the set of a rule
// that no longer holds grows by the outcome seen, never turning an ERROR into a FAIL), keeps the reasons
// already written and asks for one for each new entry; an entry whose test no longer exists is stale and
// goes, said aloud.

import type { RunRecord, RunTest } from './run-types.ts';

export type Outcome = 'PASS' | 'FAIL' | 'ERROR' | 'TIMEOUT' | 'SKIP';
export const OUTCOMES: readonly Outcome[] = ['PASS', 'FAIL', 'ERROR', 'TIMEOUT', 'SKIP'];

/** What a rule's conditions may name: the run's target, driver, machine fixture (file name) and machine digest. */
export interface ExpectationContext {
  target: string;
  driver?: string;
  /** The machine configuration's file name without .json (fixtures/machines/bench-two-axis.json: bench-two-axis). */
  machine?: string;
  machine_sha256?: string;
}

export interface ExpectationRule {
  /** The outcomes allowed for the test where the conditions hold. */
  expected: Outcome[];
  /** Why (a reviewer reads it beside the result). */
  reason: string;
  /** Conditions, all of which must hold; none: always. */
  when?: Partial<ExpectationContext>;
}

/** One test's entry: a rule, or rules of which the first whose conditions hold applies. */
export type Expectation = ExpectationRule | ExpectationRule[];
export type ExpectationFile = Record<string, Expectation>;

/** The reason a new entry gets until a person writes one (the reporter refuses no entry, a reviewer sees it). */
export const REASON_TO_FILL = 'TODO: say why this target cannot pass this test';

const WHEN_KEYS = new Set(['target', 'driver', 'machine', 'machine_sha256']);

/** Problems with a file's content (empty when it is well formed): said loudly, the wptrunner habit. */
export function expectationProblems(data: unknown): string[] {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return ['the file must be one JSON object: "<file> > <test>" -> rule or [rules]'];
  const out: string[] = [];
  for (const [name, entry] of Object.entries(data as Record<string, unknown>)) {
    const rules = Array.isArray(entry) ? entry : [entry];
    if (rules.length === 0) out.push(`${name}: an empty list of rules`);
    rules.forEach((r, i) => {
      const at = Array.isArray(entry) ? `${name} [${i}]` : name;
      if (r === null || typeof r !== 'object' || Array.isArray(r)) return void out.push(`${at}: a rule must be {"expected": [outcomes], "reason": "..."}`);
      const x = r as Record<string, unknown>;
      if (typeof x.expected === 'string') return void out.push(`${at}: "expected" is a list of outcomes (${OUTCOMES.join(', ')}), not ${JSON.stringify(x.expected)} (the older {"expected": "fail"} form is ["FAIL"])`);
      if (!Array.isArray(x.expected) || x.expected.length === 0 || !x.expected.every((o) => (OUTCOMES as readonly unknown[]).includes(o))) out.push(`${at}: "expected" must be a non-empty list of ${OUTCOMES.join(', ')}`);
      if (typeof x.reason !== 'string' || !x.reason.trim()) out.push(`${at}: "reason" must say why`);
      if (x.when !== undefined) {
        if (x.when === null || typeof x.when !== 'object' || Array.isArray(x.when)) out.push(`${at}: "when" must be an object of conditions`);
        else for (const [k, v] of Object.entries(x.when)) if (!WHEN_KEYS.has(k) || typeof v !== 'string') out.push(`${at}: condition ${k} must be one of ${[...WHEN_KEYS].join(', ')} with a string value`);
      }
      for (const k of Object.keys(x)) if (!['expected', 'reason', 'when'].includes(k)) out.push(`${at}: unknown key ${k}`);
    });
  }
  return out;
}

/** The rule that applies to a test in this context, or undefined (PASS and SKIP allowed). */
export function ruleFor(e: Expectation | undefined, ctx: ExpectationContext): ExpectationRule | undefined {
  if (e === undefined) return undefined;
  for (const r of Array.isArray(e) ? e : [e]) {
    if (Object.entries(r.when ?? {}).every(([k, v]) => ctx[k as keyof ExpectationContext] === v)) return r;
  }
  return undefined;
}

/**
 * The outcome of a recorded test. A test that ran out of vitest's time is TIMEOUT (its message says so);
 * the rest follow the test's state.
 */
export function outcomeOf(t: Pick<RunTest, 'state' | 'errors'>): Outcome {
  if (t.state === 'passed') return 'PASS';
  if (t.state === 'skipped') return 'SKIP';
  if (t.state === 'failed') return 'FAIL';
  return (t.errors ?? []).some((e) => /^Error: Test timed out in \d+ms|^Test timed out in \d+ms/.test(e)) ? 'TIMEOUT' : 'ERROR';
}

/** How a test's outcome stands against its expectation. */
export interface Judged {
  outcome: Outcome;
  /** The outcomes the applying rule allows (absent: no rule, PASS and SKIP allowed). */
  allowed?: Outcome[];
  /** The outcome is inside the set. */
  expected: boolean;
  reason?: string;
}

export function judge(t: Pick<RunTest, 'state' | 'errors'>, rule: ExpectationRule | undefined): Judged {
  const outcome = outcomeOf(t);
  if (!rule) return { outcome, expected: outcome === 'PASS' || outcome === 'SKIP' };
  return { outcome, allowed: [...rule.expected], expected: rule.expected.includes(outcome), reason: rule.reason };
}

export interface ExpectationUpdate {
  next: ExpectationFile;
  /** New entries (an outcome other than PASS or SKIP, no rule), written with REASON_TO_FILL. */
  added: string[];
  /** Outcome inside its set: rule kept. */
  kept: string[];
  /** Outcome outside its set: the outcome seen was added to the set (an ERROR stays ERROR). */
  widened: string[];
  /** Passed where the rule allowed only failures: taken out (or PASS added when other conditions remain). */
  fixed: string[];
  /** Listed but no such test in the run (a whole run): taken out. */
  stale: string[];
}

const key = (t: { file: string; fullName: string }): string => `${t.file} > ${t.fullName}`;

/**
 * The file's next content from a run, in the run's context. Entries for tests the run did not include are
 * kept as they are unless the run was whole (no file filter, no shard, no name filter): then they are stale.
 * Only the rule that applies in this context changes; rules for other conditions are kept.
 */
export function updateExpectations(run: Pick<RunRecord, 'tests'> & { selection?: RunRecord['selection'] }, current: ExpectationFile, ctx: ExpectationContext): ExpectationUpdate {
  const whole = wholeRun(run);
  const byKey = new Map(run.tests.map((t) => [key(t), t]));
  const next: ExpectationFile = {};
  const u: ExpectationUpdate = { next, added: [], kept: [], widened: [], fixed: [], stale: [] };
  for (const [k, e] of Object.entries(current)) {
    const t = byKey.get(k);
    if (!t) {
      if (whole) u.stale.push(k);
      else next[k] = e;
      continue;
    }
    const rules = Array.isArray(e) ? [...e] : [e];
    const rule = ruleFor(e, ctx);
    const o = outcomeOf(t);
    if (!rule || o === 'SKIP' || rule.expected.includes(o)) {
      // A skip says nothing either way; no applying rule: left as written (a new one is added below if needed).
      next[k] = e;
      if (rule && o !== 'SKIP') u.kept.push(k);
      continue;
    }
    const i = rules.indexOf(rule);
    if (o === 'PASS' && rule.expected.every((x) => x !== 'PASS')) {
      // Fixed here: a rule without conditions goes; a conditional one goes as well (PASS is the default).
      rules.splice(i, 1);
      u.fixed.push(k);
    } else {
      rules[i] = { ...rule, expected: OUTCOMES.filter((x) => x === o || rule.expected.includes(x)) };
      u.widened.push(k);
    }
    if (rules.length) next[k] = rules.length === 1 && !Array.isArray(e) ? rules[0]! : rules;
  }
  for (const t of run.tests) {
    const k = key(t);
    const o = outcomeOf(t);
    if (o === 'PASS' || o === 'SKIP' || ruleFor(next[k], ctx)) continue;
    const rule: ExpectationRule = { expected: [o], reason: REASON_TO_FILL };
    const have = next[k];
    next[k] = have === undefined ? rule : [...(Array.isArray(have) ? have : [have]), rule];
    u.added.push(k);
  }
  const sorted: ExpectationFile = {};
  for (const k of Object.keys(next).sort()) sorted[k] = next[k]!;
  u.next = sorted;
  return u;
}

/** Expectations that name no test of a whole run (the reporter states them as a verdict note). */
export function staleExpectations(run: Pick<RunRecord, 'tests'> & { selection?: RunRecord['selection'] }, current: ExpectationFile): string[] {
  if (!wholeRun(run)) return [];
  const have = new Set(run.tests.map(key));
  return Object.keys(current).filter((k) => !have.has(k)).sort();
}

function wholeRun(run: { selection?: RunRecord['selection'] }): boolean {
  const s = run.selection;
  return s !== undefined && s.filters.length === 0 && !s.shard && !s.grep;
}
