// Who may import whom, as one table (DESIGN.md rule 1 and docs/architecture.md):
// - suites/ and harness/ never import sims/ or drivers/: they reach the system as a client would, and a
//   target may only start the reference stack as a process;
// - drivers/ never import sims/: a driver sits below the core and knows only the bus interface;
// - the service (sims/service/) uses from the core (sims/core/) only its protocol and the capture layout
//   and reader, so it can run against a core in another thread or process;
// - the oracle and the catalogue never import the report: they are the reference, the report an output;
// - paced replay (sims/replay/) is reached by neither the core nor the service: its loop is a worker entry
//   of its own, chosen by clock mode in the core loop registry (sims/core-loops.ts), and the service sees
//   replay only through the core link's messages.
// - the fixture every suite imports (harness/fixture.ts) knows no recording or replay and no target: a
//   recorded or replayed run's per-test stacks and verdicts are the record and replay targets'
//   (harness/targets/record.ts, replay.ts), and it reaches every target through the registry (index.ts);
// - fixtures/ (fixtures/contract/: the verdict schema and file names the stack and the harness share)
//   imports none of them, so both sides may import it without importing each other.
// A rule the code breaks today is listed in KNOWN_OFFENCES with a note; the list can only shrink (an
// offence that is gone must be struck from it).

import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** What sims/service/ may use from sims/core/. Update this list when the core's modules move. */
export const SERVICE_MAY_USE_FROM_CORE = [
  'sims/core/protocol.ts', // the private channel's messages
  'sims/core/reasons.ts', // the reason registry: native and jog reasons, their labels, who decides them
  'sims/core/plan-arena.ts', // the plan memory both sides write (the core makes it, the upload writes into it)
  'sims/core/capture/layout.ts', // telemetry capture layout (shared file mapping)
  'sims/core/capture/reader.ts', // reading the capture ring
  'sims/core/worker-entry.mjs', // started as the core's thread (new URL), never imported
];

interface Rule {
  rule: string;
  /** Folders whose files the rule applies to (relative to the project root). */
  from: string[];
  /** Folders or files those files must not reach. */
  forbid: string[];
  /** Files inside a forbidden folder that are allowed. */
  allow?: string[];
  /** Folders (or files) that the rule's *.test.ts files may reach all the same (a driver's test runs it under the real core). */
  testsMay?: string[];
}

export const RULES: Rule[] = [
  { rule: 'suites/ never imports sims/ or drivers/', from: ['suites'], forbid: ['sims', 'drivers'] },
  { rule: 'harness/ never imports sims/ or drivers/', from: ['harness'], forbid: ['sims', 'drivers'] },
  { rule: 'drivers/ never imports sims/ (its tests may run a driver under the core)', from: ['drivers'], forbid: ['sims'], testsMay: ['sims/core', 'sims/config', 'sims/main.ts'] },
  { rule: "sims/service/ uses from sims/core/ only the protocol, the reason registry, the plan arena and the capture layout and reader", from: ['sims/service'], forbid: ['sims/core'], allow: SERVICE_MAY_USE_FROM_CORE },
  { rule: 'the oracle and the catalogue never import the report', from: ['harness/oracle', 'harness/catalogue'], forbid: ['harness/report'] },
  // Paced replay is one component (sims/replay/, docs/recording.md) above the core: the service sees it only
  // through the core link's messages, and the core not at all (sims/core-loops.ts starts its loop).
  { rule: 'sims/service/ never imports sims/replay/', from: ['sims/service'], forbid: ['sims/replay'] },
  { rule: 'sims/core/ never imports sims/replay/', from: ['sims/core'], forbid: ['sims/replay'] },
  // The file contract between the stack and the harness (the replay verdict's schema, the names of a
  // restarted core's files) is neutral ground both sides import: it imports neither.
  { rule: 'fixtures/ imports nothing of harness/, suites/, sims/ or drivers/', from: ['fixtures'], forbid: ['harness', 'suites', 'sims', 'drivers'] },
  // A suite's fixture is the same on every target; what a recorded or replayed run does per test (stacks of
  // its own, recordings filed, replay verdicts turned into outcomes) is one fixture body of the targets'.
  {
    rule: 'harness/fixture.ts imports no recording or replay module',
    from: ['harness/fixture.ts'],
    forbid: ['harness/targets/recorder.ts', 'harness/targets/recording-store.ts', 'harness/targets/replay.ts', 'harness/targets/record.ts', 'harness/targets/test-stacks.ts', 'fixtures/contract/replay-verdict.ts'],
  },
  // Nor does it know any one target: it opens what the registry's descriptor for HIL_TARGET opens, and asks
  // the descriptor's abilities (harness/targets/index.ts).
  {
    rule: 'harness/fixture.ts names no target module',
    from: ['harness/fixture.ts'],
    forbid: ['harness/targets/sim.ts', 'harness/targets/external.ts', 'harness/targets/rig.ts'],
  },
];

/**
 * Offences known today, as "rule: file -> specifier", each with a note saying who removes it. Empty now:
 * the service's NATIVE_REASON import from the core and the capture module split were fixed on main, and the
 * catalogue's gate no longer takes its CoverageEntry type from the report.
 */
export const KNOWN_OFFENCES: ReadonlyArray<{ offence: string; note: string }> = [];

function* sources(dir: string): Generator<string> {
  if (statSync(dir).isFile()) {
    yield dir;
    return;
  }
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === 'node_modules') continue;
    if (statSync(p).isDirectory()) yield* sources(p);
    else if (/\.(m|c)?[jt]s$/.test(name)) yield p;
  }
}

/** Every module specifier in a file: static imports, re-exports, dynamic import(), require(), import.meta.resolve(). */
export function specifiers(text: string): string[] {
  const out: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"`]([^'"`]+)['"`]/g,
    /\brequire\s*\(\s*['"`]([^'"`]+)['"`]/g,
    /\bimport\.meta\.resolve\s*\(\s*['"`]([^'"`]+)['"`]/g,
    /\bnew\s+URL\s*\(\s*['"`]([^'"`]+)['"`]\s*,\s*import\.meta\.url/g,
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) out.push(m[1]!);
  return out;
}

test('the specifier scanner sees every import form', () => {
  // Folder names come from variables so that this fixture text is not itself an import of them.
  const [S, D] = ['sims', 'drivers'];
  const text = `import a from '../${S}/x.ts';\nimport type { B } from "../${D}/y.ts";\nexport * from '../${S}/z.ts';\nimport '../${S}/side.ts';\nconst c = await import('../${D}/d.ts');\nrequire('../${S}/r.js');\nnew URL('../${S}/w.ts', import.meta.url);`;
  expect(specifiers(text)).toEqual(
    expect.arrayContaining([`../${S}/x.ts`, `../${D}/y.ts`, `../${S}/z.ts`, `../${S}/side.ts`, `../${D}/d.ts`, `../${S}/r.js`, `../${S}/w.ts`]),
  );
});

/** Every offence against the table: "rule: file -> specifier". */
function offences(root = ROOT): string[] {
  const self = fileURLToPath(import.meta.url);
  const out: string[] = [];
  for (const r of RULES) {
    const forbid = r.forbid.map((f) => join(root, f));
    const allow = new Set((r.allow ?? []).map((f) => join(root, f)));
    const testsMay = (r.testsMay ?? []).map((f) => join(root, f));
    for (const top of r.from) {
      if (!existsSync(join(root, top))) continue;
      for (const file of sources(join(root, top))) {
        if (file === self) continue; // this file names the folders in its own fixture text
        for (const spec of specifiers(readFileSync(file, 'utf8'))) {
          if (!spec.startsWith('.') && !spec.startsWith('/')) continue;
          const target = resolve(dirname(file), spec);
          if (allow.has(target)) continue;
          if (file.endsWith('.test.ts') && testsMay.some((f) => target === f || target.startsWith(f + '/'))) continue;
          if (forbid.some((f) => target === f || target.startsWith(f + '/'))) out.push(`${r.rule}: ${relative(root, file)} -> ${spec}`);
        }
      }
    }
  }
  return out;
}

describe('the import table', () => {
  const found = offences();
  const known = new Set(KNOWN_OFFENCES.map((k) => k.offence));

  test.each(RULES.map((r) => ({ ...r, name: r.rule })))('$name', (r) => {
    expect(found.filter((o) => o.startsWith(`${r.rule}: `) && !known.has(o))).toEqual([]);
  });

  test('known offences still exist (the list only shrinks) and each has a note', () => {
    for (const k of KNOWN_OFFENCES) {
      expect(found, `${k.offence} is fixed: strike it from KNOWN_OFFENCES`).toContain(k.offence);
      expect(k.note.trim().length, k.offence).toBeGreaterThan(0);
    }
  });

  test('the allowed core modules exist, so the list stays true when the core moves', () => {
    for (const f of SERVICE_MAY_USE_FROM_CORE) expect(existsSync(join(ROOT, f)), f).toBe(true);
  });

  test('the table finds each kind of offence in a tree built for it', () => {
    // Folder names come from variables so that this fixture text is not itself an import of them.
    const [S, D] = ['sims', 'drivers'];
    const root = mkdtempSync(join(tmpdir(), 'hil-imports-'));
    const put = (file: string, text: string) => {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), text);
    };
    try {
      put('suites/a.test.ts', `import x from '../${S}/main.ts';`);
      put('harness/targets/t.ts', `const u = new URL('../../${D}/bus.ts', import.meta.url);`);
      put(`${D}/sim/driver.ts`, `import { Core } from '../../${S}/core/core.ts';\nimport { Bus } from '../bus.ts';`);
      put(`${S}/service/machine.ts`, `import { NATIVE_REASON } from '../core/core.ts';\nimport type { ToCore } from '../core/protocol.ts';\nimport { readRing } from '../core/capture/reader.ts';`);
      put(`${S}/service/telemetry.ts`, `import { Writer } from '../core/capture/writer.ts';`);
      put(`${D}/replay/r.test.ts`, `import { CoreHost } from '../../${S}/core/host.ts';\nimport { ControlService } from '../../${S}/service/service.ts';`);
      put('harness/oracle/o.ts', `import type { RunRecord } from '../report/run-types.ts';\nimport { HarnessError } from '../errors.ts';`);
      put('harness/catalogue/c.ts', `export * from '../report/verdict.ts';`);
      put(`${S}/service/cue.ts`, `import { ReplayPacer } from '../replay/pacer.ts';`);
      put(`${S}/core/core.ts`, `import { FenceMap } from '../replay/match.ts';`);
      put(`${S}/core/worker.ts`, `import { runPaced } from '../replay/worker-loop.ts';`);
      put('fixtures/contract/c.ts', `import { RecordingStore } from '../../harness/targets/recording-store.ts';\nimport { writeVerdictFile } from '../../${S}/replay/verdict-file.ts';`);
      put('harness/targets/r.ts', `import { parseVerdictFile } from '../../fixtures/contract/replay-verdict.ts';`);
      put(`${S}/replay/v.ts`, `import { verdictFileText } from '../../fixtures/contract/replay-verdict.ts';`);
      put('harness/fixture.ts', `import { Recorder } from './targets/recorder.ts';\nimport { perTestStacks } from './targets/test-stacks.ts';\nimport { simTarget } from './targets/sim.ts';\nimport { TARGETS } from './targets/index.ts';`);
      expect(offences(root).sort()).toEqual(
        [
          `suites/ never imports sims/ or drivers/: suites/a.test.ts -> ../${S}/main.ts`,
          `harness/ never imports sims/ or drivers/: harness/targets/t.ts -> ../../${D}/bus.ts`,
          `drivers/ never imports sims/ (its tests may run a driver under the core): ${D}/sim/driver.ts -> ../../${S}/core/core.ts`,
          `drivers/ never imports sims/ (its tests may run a driver under the core): ${D}/replay/r.test.ts -> ../../${S}/service/service.ts`,
          `sims/service/ uses from sims/core/ only the protocol, the reason registry, the plan arena and the capture layout and reader: ${S}/service/machine.ts -> ../core/core.ts`,
          `sims/service/ uses from sims/core/ only the protocol, the reason registry, the plan arena and the capture layout and reader: ${S}/service/telemetry.ts -> ../core/capture/writer.ts`,
          'the oracle and the catalogue never import the report: harness/oracle/o.ts -> ../report/run-types.ts',
          'the oracle and the catalogue never import the report: harness/catalogue/c.ts -> ../report/verdict.ts',
          `sims/service/ never imports sims/replay/: ${S}/service/cue.ts -> ../replay/pacer.ts`,
          `sims/core/ never imports sims/replay/: ${S}/core/core.ts -> ../replay/match.ts`,
          `sims/core/ never imports sims/replay/: ${S}/core/worker.ts -> ../replay/worker-loop.ts`,
          'fixtures/ imports nothing of harness/, suites/, sims/ or drivers/: fixtures/contract/c.ts -> ../../harness/targets/recording-store.ts',
          `fixtures/ imports nothing of harness/, suites/, sims/ or drivers/: fixtures/contract/c.ts -> ../../${S}/replay/verdict-file.ts`,
          'harness/fixture.ts imports no recording or replay module: harness/fixture.ts -> ./targets/recorder.ts',
          'harness/fixture.ts imports no recording or replay module: harness/fixture.ts -> ./targets/test-stacks.ts',
          'harness/fixture.ts names no target module: harness/fixture.ts -> ./targets/sim.ts',
        ].sort(),
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
