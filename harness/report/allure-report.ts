// Allure's own report of a run, generated the way the project configures it (allurerc.mjs: one
// self-contained file that opens from disk, FAIL / ERROR / host-too-slow categories, a history file),
// with the analytics tag Allure 3's page template always writes (a Google Tag Manager script; the
// plugin has no option for it) taken out: the report is opened offline and must not call out.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HarnessError } from '../errors.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ALLURE_CLI = join(ROOT, 'node_modules', 'allure', 'cli.js');
export const ALLURE_CONFIG = join(ROOT, 'allurerc.mjs');

/** The analytics block of Allure's page template: the gtag loader and its inline configuration. */
const ANALYTICS = /\s*<script async src="https:\/\/www\.googletagmanager\.com\/gtag\/js\?id=[^"]*"><\/script>\s*<script>[^<]*?gtag\('config'[^<]*?<\/script>/g;

/** The page without Allure's analytics tag; how many blocks were taken out. */
export function stripAnalytics(html: string): { html: string; removed: number } {
  let removed = 0;
  const out = html.replace(ANALYTICS, () => {
    removed++;
    return '';
  });
  return { html: out, removed };
}

export interface AllureReportOptions {
  /** allure-results directories. */
  results: string[];
  /** Output directory (index.html inside). */
  out: string;
  /** The history file the report reads and appends to (default: allurerc.mjs's, reports/allure-history.jsonl). */
  historyPath?: string;
  reportName?: string;
}

/** Run `allure generate` with the project's configuration, then strip the analytics tag. Returns index.html's path. */
export async function generateAllureReport(o: AllureReportOptions): Promise<string> {
  for (const r of o.results) if (!existsSync(r)) throw new HarnessError('HIL_ERR_TOOL_FAILED', `no Allure results at ${r}`);
  const args = [ALLURE_CLI, 'generate', '--config', ALLURE_CONFIG, '--output', o.out, ...(o.reportName ? ['--report-name', o.reportName] : []), ...o.results];
  const env = { ...process.env, ...(o.historyPath ? { HIL_ALLURE_HISTORY: o.historyPath } : {}) };
  const { code, text } = await new Promise<{ code: number | null; text: string }>((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (text += d.toString('utf8')));
    child.once('exit', (c) => resolve({ code: c, text }));
  });
  const index = join(o.out, 'index.html');
  if (code !== 0 || !existsSync(index)) throw new HarnessError('HIL_ERR_TOOL_FAILED', `allure generate exited ${code}: ${text.slice(-800)}`);
  const { html } = stripAnalytics(readFileSync(index, 'utf8'));
  writeFileSync(index, html);
  return index;
}
