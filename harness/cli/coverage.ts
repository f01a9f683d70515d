// `hil coverage`: covered and pending catalogue items per family, from the collected suites.

import { parseArgs } from 'node:util';
import { computeCoverage, familyCounts } from '../catalogue/gate.ts';
import { stringifyExact } from '../oracle/json.ts';
import { ROOT, wantsHelp } from './common.ts';
import { CONFORMANCE_PROJECTS } from './run.ts';

export async function coverage(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'coverage')) return 0;
  const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false } } });
  const { createVitest } = await import('vitest/node');
  const vitest = await createVitest('test', { root: ROOT, watch: false, project: CONFORMANCE_PROJECTS, reporters: [] });
  const traces: Array<{ fullName: string; covers: string[] }> = [];
  try {
    const result = await vitest.collect();
    for (const m of result.testModules) {
      const file = m.relativeModuleId;
      for (const t of m.children.allTests()) traces.push({ fullName: `${file} > ${t.fullName}`, covers: t.meta().covers ?? [] });
    }
    if (result.unhandledErrors.length) {
      process.stderr.write(`collection errors:\n${result.unhandledErrors.map((e) => `  ${(e as Error).message}`).join('\n')}\n`);
    }
  } finally {
    await vitest.close();
  }
  const cov = computeCoverage(traces);
  if (values.json) {
    process.stdout.write(
      stringifyExact(
        cov.entries.map((e) => (e.status === 'covered' ? { id: e.id, status: e.status, tests: e.tests } : { id: e.id, status: e.status, reason: e.reason })),
      ) + '\n',
    );
  } else {
    const rows = familyCounts(cov.entries);
    process.stdout.write(`${'family'.padEnd(16)} ${'covered'.padStart(8)} ${'pending'.padStart(8)} ${'total'.padStart(6)}\n`);
    for (const r of rows) process.stdout.write(`${r.family.padEnd(16)} ${String(r.covered).padStart(8)} ${String(r.pending).padStart(8)} ${String(r.total).padStart(6)}\n`);
    const c = rows.reduce((a, r) => a + r.covered, 0);
    const t = rows.reduce((a, r) => a + r.total, 0);
    process.stdout.write(`${'all'.padEnd(16)} ${String(c).padStart(8)} ${String(t - c).padStart(8)} ${String(t).padStart(6)}\n`);
    if (cov.problems.length) {
      process.stdout.write(`\ngate problems (${cov.problems.length}):\n${cov.problems.slice(0, 30).map((p) => `  - ${p}`).join('\n')}\n`);
    }
  }
  return cov.problems.length ? 1 : 0;
}
