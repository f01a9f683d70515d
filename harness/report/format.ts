// Small text helpers the report modules share: HTML escaping, locale-independent ordering and the
// number, time and size formats the report prints (never the renderer's locale or time zone).

import type { RunTest, TestState } from './run-types.ts';

const DESCRIBE_JSON_MAX = 32 * 1024;
const WARN_LIST_MAX = 8;

export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Code-unit order: locale-independent, so the output does not depend on the machine's locale. */
export function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const STATE_ORDER: Record<TestState, number> = { errored: 0, failed: 1, passed: 2, skipped: 3 };

/** File then full name; with byState, errored first, then failures, then expected failures last. */
export function sortTests(tests: readonly RunTest[], byState: boolean): RunTest[] {
  const rank = (t: RunTest): number => (byState ? STATE_ORDER[t.state] * 2 + (t.expected_failure ? 1 : 0) : 0);
  return [...tests].sort((a, b) => rank(a) - rank(b) || cmp(a.file, b.file) || cmp(a.fullName, b.fullName));
}

export function stateBadge(s: TestState): string {
  const label = { passed: 'PASS', failed: 'FAIL', errored: 'ERROR', skipped: 'SKIP' }[s];
  return `<span class="badge b-${s}">${label}</span>`;
}

export function cssToken(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9_-]/g, '_');
}

export function scalar(v: unknown): string {
  if (v === undefined || v === null) return '<span class="muted">—</span>';
  if (typeof v === 'string') return esc(v);
  if (typeof v === 'number' || typeof v === 'boolean') return esc(String(v));
  const j = JSON.stringify(v) ?? String(v);
  return `<code>${esc(j.length > 200 ? `${j.slice(0, 200)}…` : j)}</code>`;
}

export function jsonBlock(v: unknown): string {
  let j: string;
  try {
    j = JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    j = String(v);
  }
  const cut = j.length > DESCRIBE_JSON_MAX;
  return `<pre class="json">${esc(cut ? j.slice(0, DESCRIBE_JSON_MAX) : j)}</pre>${cut ? `<p class="muted small">Truncated at ${fmtBytes(DESCRIBE_JSON_MAX)}.</p>` : ''}`;
}

export function fmtDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.round(s - m * 60)).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`;
}

/** The recorded timestamp, plus its UTC reading when it parses; never the renderer's local time zone. */
export function fmtTime(iso: string): string {
  if (!iso) return 'not recorded';
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return `${iso} (unparsed)`;
  const utc = new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC');
  return utc === iso ? iso : `${utc} (${iso})`;
}

export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function fmtNum(n: number): string {
  if (Number.isInteger(n)) return String(n);
  return Math.abs(n) >= 1000 || Math.abs(n) < 0.01 ? n.toExponential(3) : n.toPrecision(4);
}

export function plural(n: number): string {
  return n === 1 ? '' : 's';
}

export function listSome(items: string[]): string {
  const shown = items.slice(0, WARN_LIST_MAX).join('; ');
  return items.length > WARN_LIST_MAX ? `${shown}; and ${items.length - WARN_LIST_MAX} more` : shown;
}

export function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
