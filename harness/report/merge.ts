// `hil merge DIR... --out DIR`: runs made on several machines or CI runners (hil run --shard i/n, or whole
// runs of their own) merged into one run, with the test runner's and Allure's own mechanisms rather
// than a format of ours: vitest replays the shards' blob reports (`--merge-reports`) through the harness
// reporter, which computes run.json, the verdict and the coverage exactly as for a run in one piece
// (a test failed in any shard fails the merge; an item covered in any shard counts); Allure's results
// are a directory of independent files, merged by putting them together. Runs against different targets
// (name, driver, machine digest) are never mixed: each group becomes a merged run of its own.

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { HarnessError } from '../errors.ts';
import { exitCodeOf, HilReporter, type Expectation } from './reporter.ts';
import { readRunRecord } from './run-reader.ts';
import type { RunRecord } from './run-types.ts';
import { writeHtmlReport } from './html.ts';

export interface MergeOptions {
  root: string;
  dirs: string[];
  out: string;
  report: boolean;
  expectationsFor: (run: RunRecord) => Record<string, Expectation>;
  write?: (s: string) => void;
}

export interface MergedRun {
  out: string;
  group: string;
  record: RunRecord | undefined;
  exitCode: number;
  closing: string;
}

/** One key per target the runs were made against. */
export function groupKey(r: RunRecord): string {
  return `${r.target.name}-${r.target.driver}-${(r.environment.machine_sha256 || 'unknown').slice(0, 12)}`;
}

/**
 * Whether the shards together are whole runs: no file or name filter, and either unsharded or every
 * share 1..n of one n present exactly once. Only then does the traceability gate apply to the merge.
 */
export function wholeMerge(runs: readonly RunRecord[]): boolean {
  if (runs.some((r) => !r.selection || r.selection.filters.length || r.selection.grep)) return false;
  const shards = runs.map((r) => r.selection!.shard).filter((s): s is string => s !== undefined);
  if (shards.length === 0) return true;
  if (shards.length !== runs.length) return false;
  const n = new Set(shards.map((s) => s.split('/')[1]));
  if (n.size !== 1) return false;
  const total = Number([...n][0]);
  const seen = new Set(shards.map((s) => Number(s.split('/')[0])));
  return seen.size === total && shards.length === total;
}

export async function mergeRuns(o: MergeOptions): Promise<MergedRun[]> {
  const write = o.write ?? ((s: string) => process.stdout.write(s));
  const runs: { dir: string; run: RunRecord }[] = [];
  for (const dir of o.dirs) {
    const warnings: string[] = [];
    const { run } = await readRunRecord(join(dir, 'run.json'), warnings);
    if (!existsSync(join(dir, 'blob')) || !readdirSync(join(dir, 'blob')).some((f) => f.endsWith('.json'))) {
      throw new HarnessError('HIL_ERR_TOOL_FAILED', `${dir}: no vitest blob report under blob/ (made by hil run since the merge support)`);
    }
    runs.push({ dir, run });
  }
  const groups = new Map<string, typeof runs>();
  for (const r of runs) {
    const k = groupKey(r.run);
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  const out: MergedRun[] = [];
  const { startVitest } = await import('vitest/node');
  for (const [group, members] of groups) {
    const dest = groups.size === 1 ? o.out : join(o.out, group);
    mkdirSync(dest, { recursive: true });
    // vitest merges the blob files of one directory; each shard's file name says which share it was.
    const blobs = mkdtempSync(join(tmpdir(), 'hil-merge-'));
    try {
      members.forEach((m, i) => {
        for (const f of readdirSync(join(m.dir, 'blob'))) if (f.endsWith('.json')) copyFileSync(join(m.dir, 'blob', f), join(blobs, `${i}-${basename(f)}`));
      });
      rmSync(join(dest, 'allure-results'), { recursive: true, force: true });
      mkdirSync(join(dest, 'allure-results'), { recursive: true });
      for (const m of members) {
        const src = join(m.dir, 'allure-results');
        if (!existsSync(src)) continue;
        for (const f of readdirSync(src)) copyFileSync(join(src, f), join(dest, 'allure-results', f));
      }
      const records = members.map((m) => m.run);
      const whole = wholeMerge(records);
      const reporter = new HilReporter({
        command: `hil merge ${members.map((m) => m.dir).join(' ')} --out ${o.out}`,
        reportsDir: dest,
        gate: whole,
        targetName: records[0]!.target.name,
        selection: whole ? { filters: [] } : { filters: [...new Set(records.flatMap((r) => r.selection?.filters ?? []))] },
        expectations: o.expectationsFor(records[0]!),
        mergedFrom: records,
        write,
      });
      write(`merging ${members.length} run${members.length === 1 ? '' : 's'} of ${group}\n`);
      const vitest = await startVitest('test', [], { root: o.root, watch: false, mergeReports: blobs, reporters: [['junit', { outputFile: join(dest, 'junit.xml') }], reporter] });
      await vitest.close();
      const rec = reporter.record;
      if (o.report && rec) {
        const r = await writeHtmlReport({ runJson: join(dest, 'run.json'), allureDir: join(dest, 'allure-results'), outFile: join(dest, 'html', 'index.html') });
        write(`report: ${r.outFile}${r.warnings.length ? ` (${r.warnings.length} notes)` : ''}\n`);
      }
      out.push({ out: dest, group, record: rec, exitCode: exitCodeOf(rec), closing: reporter.closingLine() });
    } finally {
      rmSync(blobs, { recursive: true, force: true });
    }
  }
  return out;
}
