// Allure's own report as the project configures it (allurerc.mjs through hil's generateAllureReport): one
// self-contained file (opens from disk), no analytics script, FAIL / ERROR / host-too-slow categories, and
// the history of earlier generations carried into the next one.

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { generateAllureReport, stripAnalytics } from './allure-report.ts';

const dir = mkdtempSync(join(tmpdir(), 'hil-allure-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The files a single-file report embeds: d("name","base64") calls in its page. */
function embedded(html: string): Map<string, string> {
  return new Map([...html.matchAll(/d\("([^"]+)","([A-Za-z0-9+/=]*)"\)/g)].map((m) => [m[1]!, Buffer.from(m[2]!, 'base64').toString('utf8')]));
}

const result = (uuid: string, name: string, status: string, message?: string) => ({
  uuid,
  historyId: `h-${name}`,
  testCaseId: `c-${name}`,
  fullName: `suites/x.test.ts#${name}`,
  name,
  status,
  ...(message ? { statusDetails: { message } } : {}),
  stage: 'finished',
  start: 1_000,
  stop: 1_100,
  labels: [{ name: 'suite', value: 'x' }],
  steps: [],
  attachments: [],
  parameters: [],
});

test('the analytics block of the page template is taken out, and only it', () => {
  const page = `<body><p>x</p>\n    <script async src="https://www.googletagmanager.com/gtag/js?id=G-ABC"></script>\n    <script>\n        window.dataLayer = window.dataLayer || [];\n        function gtag(){dataLayer.push(arguments);}\n        gtag('js', new Date());\n        gtag('config', 'G-ABC', {"report": "awesome"});\n    </script>\n    <script>keep()</script></body>`;
  const r = stripAnalytics(page);
  expect(r.removed).toBe(1);
  expect(r.html).toBe('<body><p>x</p>\n    <script>keep()</script></body>');
  expect(stripAnalytics(r.html).removed).toBe(0);
});

test('one file from disk, no analytics, results in the FAIL / ERROR / host-too-slow categories, history carried to the next report', { timeout: 120_000 }, async () => {
  const results = join(dir, 'results');
  mkdirSync(results);
  const write = (r: ReturnType<typeof result>) => writeFileSync(join(results, `${r.uuid}-result.json`), JSON.stringify(r));
  write(result('u1', 'moves', 'passed'));
  write(result('u2', 'refuses stale', 'failed', 'expected control_session_stale, got expired'));
  write(result('u3', 'lateness', 'broken', 'HIL_ERR_HOST_TOO_SLOW: the host stalled 80 ms while stepping the core'));
  write(result('u4', 'starts', 'broken', 'HIL_ERR_STACK_START: the stack did not start'));
  const history = join(dir, 'allure-history.jsonl');
  const index = await generateAllureReport({ results: [results], out: join(dir, 'one'), historyPath: history });
  expect(readdirSync(join(dir, 'one')).filter((f) => f !== 'summary.json' && f !== 'test-results.json')).toEqual(['index.html']);
  const html = readFileSync(index, 'utf8');
  expect(html).not.toContain('googletagmanager');
  expect(html).not.toMatch(/gtag\(/);
  const files = embedded(html);
  const cats = JSON.parse(files.get('widgets/categories.json')!) as { nodes: Record<string, { type: string; name: string; statistic?: Record<string, number> }> };
  const byName = Object.fromEntries(Object.values(cats.nodes).filter((n) => n.type === 'category').map((n) => [n.name, n.statistic]));
  expect(byName).toEqual({
    'ERROR: host too slow (the harness could not keep a timing rule; says nothing about the target)': { broken: 1, total: 1 },
    'FAIL: the target did not do what the documents say': { failed: 1, total: 1 },
    'ERROR: the harness or the environment broke': { broken: 1, total: 1 },
  });
  // The history file has the first generation; the second report of the same tests carries it.
  expect(readFileSync(history, 'utf8').trim().split('\n').length).toBe(1);
  writeFileSync(join(results, 'u2-result.json'), JSON.stringify({ ...result('u2', 'refuses stale', 'passed'), start: 2_000, stop: 2_100 }));
  const second = readFileSync(await generateAllureReport({ results: [results], out: join(dir, 'two'), historyPath: history }), 'utf8');
  expect(readFileSync(history, 'utf8').trim().split('\n').length).toBe(2);
  const tr = [...embedded(second).entries()].filter(([k]) => k.startsWith('data/test-results/')).map(([, v]) => JSON.parse(v) as { name: string; history?: Array<{ status: string }>; transition?: string });
  const fixed = tr.find((t) => t.name === 'refuses stale')!;
  expect(fixed.history?.map((h) => h.status)).toEqual(['failed']);
  expect(fixed.transition).toBe('fixed');
});
