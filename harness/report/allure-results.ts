// Allure results (allure-vitest 3.12) as the report reads them: <uuid>-result.json,
// <uuid>-attachment.<ext>, environment.properties. They only enrich a test of run.json (the authority for
// what ran) with its steps and attachments; malformed or missing input becomes a warning, never an abort.

import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RunTest, TestState } from './run-types.ts';
import { cmp, errText, fmtBytes, isRecord, listSome, plural } from './format.ts';

// Budgets that keep the page printable and small even when a run attaches large evidence.
export const TEXT_INLINE_MAX = 64 * 1024;
const IMAGE_INLINE_MAX = 1536 * 1024;
const STEP_DEPTH_MAX = 12;
const STEP_COUNT_MAX = 500;

export interface AllureAttachment {
  name: string;
  source: string;
  type: string;
}

export interface AllureStep {
  name: string;
  status: string;
  start?: number;
  stop?: number;
  message?: string;
  steps: AllureStep[];
  attachments: AllureAttachment[];
}

export interface AllureResult {
  file: string;
  uuid: string;
  name: string;
  fullName: string;
  status: string;
  message?: string;
  trace?: string;
  labels: { name: string; value: string }[];
  parameters: { name: string; value: string }[];
  steps: AllureStep[];
  attachments: AllureAttachment[];
  start?: number;
  stop?: number;
}

export async function loadAllure(dir: string, warnings: string[]): Promise<{ results: AllureResult[]; environment: [string, string][] }> {
  const results: AllureResult[] = [];
  let environment: [string, string][] = [];
  let names: string[];
  try {
    names = (await readdir(dir)).sort(cmp);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    warnings.push(
      code === 'ENOENT'
        ? `allure results directory not found (${dir}); tests are shown without steps and attachments`
        : `allure results directory unreadable (${dir}: ${errText(err)}); tests are shown without steps and attachments`,
    );
    return { results, environment };
  }
  const malformed: string[] = [];
  for (const name of names) {
    if (name === 'environment.properties') {
      try {
        environment = parseProperties(await readFile(path.join(dir, name), 'utf8'));
      } catch (err) {
        warnings.push(`allure: environment.properties unreadable: ${errText(err)}`);
      }
      continue;
    }
    if (!name.endsWith('-result.json')) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(path.join(dir, name), 'utf8'));
    } catch (err) {
      malformed.push(`${name} (${errText(err)})`);
      continue;
    }
    const r = toAllureResult(name, parsed);
    if (typeof r === 'string') malformed.push(`${name} (${r})`);
    else results.push(r);
  }
  for (const m of malformed) warnings.push(`allure: malformed result file ignored: ${m}`);
  return { results, environment };
}

function toAllureResult(file: string, v: unknown): AllureResult | string {
  if (!isRecord(v)) return 'not a JSON object';
  const name = typeof v.name === 'string' ? v.name : undefined;
  const fullName = typeof v.fullName === 'string' ? v.fullName : undefined;
  if (name === undefined && fullName === undefined) return 'neither name nor fullName';
  const details = isRecord(v.statusDetails) ? v.statusDetails : {};
  const steps = { count: 0 };
  const r: AllureResult = {
    file,
    uuid: typeof v.uuid === 'string' ? v.uuid : file.replace(/-result\.json$/, ''),
    name: name ?? fullName ?? '',
    fullName: fullName ?? '',
    status: typeof v.status === 'string' ? v.status : 'unknown',
    labels: pairs(v.labels),
    parameters: pairs(v.parameters),
    steps: toSteps(v.steps, 0, steps),
    attachments: toAttachments(v.attachments),
  };
  if (typeof details.message === 'string') r.message = details.message;
  if (typeof details.trace === 'string') r.trace = details.trace;
  if (typeof v.start === 'number') r.start = v.start;
  if (typeof v.stop === 'number') r.stop = v.stop;
  return r;
}

function pairs(v: unknown): { name: string; value: string }[] {
  if (!Array.isArray(v)) return [];
  const out: { name: string; value: string }[] = [];
  for (const x of v) if (isRecord(x) && typeof x.name === 'string') out.push({ name: x.name, value: typeof x.value === 'string' ? x.value : String(x.value ?? '') });
  return out;
}

function toSteps(v: unknown, depth: number, seen: { count: number }): AllureStep[] {
  if (!Array.isArray(v) || depth > STEP_DEPTH_MAX) return [];
  const out: AllureStep[] = [];
  for (const s of v) {
    if (!isRecord(s) || seen.count >= STEP_COUNT_MAX) continue;
    seen.count++;
    const d = isRecord(s.statusDetails) ? s.statusDetails : {};
    const step: AllureStep = {
      name: typeof s.name === 'string' ? s.name : '(unnamed step)',
      status: typeof s.status === 'string' ? s.status : 'unknown',
      steps: toSteps(s.steps, depth + 1, seen),
      attachments: toAttachments(s.attachments),
    };
    if (typeof s.start === 'number') step.start = s.start;
    if (typeof s.stop === 'number') step.stop = s.stop;
    if (typeof d.message === 'string' && d.message) step.message = d.message;
    out.push(step);
  }
  return out;
}

function toAttachments(v: unknown): AllureAttachment[] {
  if (!Array.isArray(v)) return [];
  const out: AllureAttachment[] = [];
  for (const a of v) {
    if (!isRecord(a) || typeof a.source !== 'string') continue;
    out.push({ name: typeof a.name === 'string' ? a.name : a.source, source: a.source, type: typeof a.type === 'string' ? a.type : '' });
  }
  return out;
}

function parseProperties(text: string): [string, string][] {
  const out: [string, string][] = [];
  for (const line of text.split(/\r?\n/)) {
    const l = line.trim();
    if (!l || l.startsWith('#') || l.startsWith('!')) continue;
    const m = /^((?:\\.|[^=:\s\\])+)\s*[=:\s]\s*(.*)$/.exec(l);
    if (m) out.push([m[1]!.replace(/\\(.)/g, '$1'), m[2]!.replace(/\\(.)/g, '$1')]);
    else out.push([l, '']);
  }
  return out;
}

// Matching: allure-vitest writes fullName as `<package name>:<file>#<describe ... test>` joined by
// spaces; run.json writes file and `describe > test`. Match on that key, then the exact fullName, then
// on the test name together with its `covers` labels.

function runKey(t: RunTest): string {
  return `${t.file}#${t.fullName.split(' > ').join(' ')}`;
}

function allureKey(r: AllureResult): string | undefined {
  const hash = r.fullName.indexOf('#');
  if (hash < 0) return undefined;
  const left = r.fullName.slice(0, hash);
  const file = left.slice(left.lastIndexOf(':') + 1);
  return `${file}#${r.fullName.slice(hash + 1)}`;
}

function coversKey(name: string, covers: readonly string[]): string {
  return `${name}\u0000${[...covers].sort(cmp).join('\u0000')}`;
}

export function matchAllure(tests: readonly RunTest[], results: readonly AllureResult[], warnings: string[]): Map<RunTest, AllureResult> {
  const byKey = new Map<string, AllureResult[]>();
  const add = (k: string | undefined, r: AllureResult): void => {
    if (k === undefined) return;
    const list = byKey.get(k);
    if (list) list.push(r);
    else byKey.set(k, [r]);
  };
  for (const r of results) {
    add(allureKey(r), r);
    if (r.fullName) add(`=${r.fullName}`, r);
    const covers = r.labels.filter((l) => l.name === 'covers').map((l) => l.value);
    if (covers.length) add(`c${coversKey(r.name, covers)}`, r);
  }
  const matches = new Map<RunTest, AllureResult>();
  const used = new Set<AllureResult>();
  const unmatched: string[] = [];
  for (const t of tests) {
    const keys = [runKey(t), `=${t.fullName}`];
    if (t.covers.length) keys.push(`c${coversKey(t.name, t.covers)}`);
    let picked: AllureResult | undefined;
    for (const k of keys) {
      const cands = (byKey.get(k) ?? []).filter((r) => !used.has(r));
      if (cands.length) {
        picked = pickBest(cands, t.state);
        break;
      }
    }
    if (picked) {
      matches.set(t, picked);
      used.add(picked);
    } else if (t.state !== 'skipped') unmatched.push(`${t.file} > ${t.fullName}`);
  }
  if (results.length > 0 && unmatched.length)
    warnings.push(`allure: no result for ${unmatched.length} test${plural(unmatched.length)} that ran: ${listSome(unmatched)}`);
  // Retries leave several results for one test; only results that match no test at all are worth a note.
  const keyOf = (r: AllureResult): string => allureKey(r) ?? (r.fullName || r.name);
  const usedKeys = new Set([...used].map(keyOf));
  const orphans = [...new Set(results.filter((r) => !used.has(r)).map(keyOf))].filter((k) => !usedKeys.has(k));
  if (orphans.length) warnings.push(`allure: ${orphans.length} result${plural(orphans.length)} match no test in run.json (ignored): ${listSome(orphans)}`);
  return matches;
}

function pickBest(cands: AllureResult[], state: TestState): AllureResult {
  const want = state === 'errored' ? 'broken' : state;
  return [...cands].sort((a, b) => {
    const sa = a.status === want ? 0 : 1;
    const sb = b.status === want ? 0 : 1;
    if (sa !== sb) return sa - sb;
    const ta = a.stop ?? 0;
    const tb = b.stop ?? 0;
    if (ta !== tb) return tb - ta;
    return cmp(a.uuid, b.uuid);
  })[0]!;
}

export type LoadedAttachment =
  | { kind: 'text'; text: string; truncated: boolean; size: number }
  | { kind: 'image'; dataUri: string; size: number }
  | { kind: 'listed'; note: string; size?: number };

export const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/svg+xml']);
export const TEXT_TYPES = new Set(['text/plain', 'text/csv', 'text/tab-separated-values', 'application/json', 'application/xml', 'text/xml', 'text/html', 'text/css', 'text/uri-list', 'application/vnd.allure.http+json']);

export function attachmentsOf(r: AllureResult): AllureAttachment[] {
  const out: AllureAttachment[] = [...r.attachments];
  const walk = (steps: AllureStep[]): void => {
    for (const s of steps) {
      out.push(...s.attachments);
      walk(s.steps);
    }
  };
  walk(r.steps);
  return out;
}


/**
 * Read the attachments of the given results into the cache: every attachment of a failed or errored
 * test, only plots and images of the others, within the page's size budget.
 */
export async function preloadAttachments(
  allureDir: string,
  lists: { failures: readonly AllureResult[]; others: readonly AllureResult[] },
  budget: { left: number },
  cache: Map<string, LoadedAttachment>,
  warnings: string[],
): Promise<void> {
  const missing: string[] = [];
  const load = async (a: AllureAttachment, onlyPlots: boolean): Promise<void> => {
    if (cache.has(a.source)) return;
    if (onlyPlots && !(IMAGE_TYPES.has(a.type) || a.type === 'text/csv')) return;
    if (path.basename(a.source) !== a.source || a.source.startsWith('.')) {
      cache.set(a.source, { kind: 'listed', note: 'refused: source is not a plain file name' });
      warnings.push(`allure: attachment source ${JSON.stringify(a.source)} is not a plain file name; not read`);
      return;
    }
    const isImage = IMAGE_TYPES.has(a.type);
    const isText = TEXT_TYPES.has(a.type) || a.type.startsWith('text/') || a.type.endsWith('+json');
    if (!isImage && !isText) {
      cache.set(a.source, { kind: 'listed', note: `${a.type || 'unknown type'}: not shown inline` });
      return;
    }
    let data: Buffer;
    try {
      data = await readFile(path.join(allureDir, a.source));
    } catch (err) {
      cache.set(a.source, { kind: 'listed', note: 'file missing from the allure results' });
      missing.push(`${a.source} (${(err as NodeJS.ErrnoException).code ?? errText(err)})`);
      return;
    }
    if (isImage) {
      const encoded = Math.ceil(data.length / 3) * 4;
      if (data.length > IMAGE_INLINE_MAX || encoded > budget.left) {
        cache.set(a.source, { kind: 'listed', note: `image too large to inline (${fmtBytes(data.length)}); see allure-results/${a.source}`, size: data.length });
        return;
      }
      budget.left -= encoded;
      cache.set(a.source, { kind: 'image', dataUri: `data:${a.type};base64,${data.toString('base64')}`, size: data.length });
      return;
    }
    if (data.includes(0)) {
      cache.set(a.source, { kind: 'listed', note: `binary content despite type ${a.type}; not shown`, size: data.length });
      return;
    }
    const keep = Math.min(data.length, TEXT_INLINE_MAX, Math.max(0, budget.left));
    if (keep === 0) {
      cache.set(a.source, { kind: 'listed', note: `report size budget used up; see allure-results/${a.source}`, size: data.length });
      return;
    }
    budget.left -= keep * 2; // shown as text and, for CSV, as a plot
    let text = data.subarray(0, keep).toString('utf8');
    if (keep < data.length) text = text.replace(/\uFFFD$/, '');
    if (a.type === 'application/json' && keep === data.length) {
      try {
        text = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        /* shown as it is */
      }
    }
    cache.set(a.source, { kind: 'text', text, truncated: keep < data.length, size: data.length });
  };
  for (const r of lists.failures) for (const a of attachmentsOf(r)) await load(a, false);
  for (const r of lists.others) for (const a of attachmentsOf(r)) await load(a, true);
  if (missing.length) warnings.push(`allure: ${missing.length} attachment file${plural(missing.length)} missing: ${listSome(missing)}`);
}
