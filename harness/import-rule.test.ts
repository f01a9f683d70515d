// DESIGN.md rule 1: suites/ and harness/ never import from sims/ or drivers/. They reach the system as a
// client would; a target may only start the reference stack as a process.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FORBIDDEN = ['sims', 'drivers'].map((d) => join(ROOT, d) + '/');

function* sources(dir: string): Generator<string> {
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

test('nothing under suites/ or harness/ imports from sims/ or drivers/', () => {
  const offences: string[] = [];
  for (const top of ['suites', 'harness']) {
    for (const file of sources(join(ROOT, top))) {
      if (file === fileURLToPath(import.meta.url)) continue; // this file names the folders in its own fixture text
      for (const spec of specifiers(readFileSync(file, 'utf8'))) {
        if (!spec.startsWith('.') && !spec.startsWith('/')) continue;
        const target = resolve(dirname(file), spec);
        if (FORBIDDEN.some((f) => target.startsWith(f))) offences.push(`${relative(ROOT, file)} -> ${spec}`);
      }
    }
  }
  expect(offences).toEqual([]);
});
