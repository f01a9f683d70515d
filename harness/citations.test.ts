// A comment or document that names a file must name one that exists (the project's rule for comments):
// every path of the tree's own folders cited in a source comment or a Markdown document is checked
// against the working tree, so a file moved or renamed without its citations fails here.

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { expect, test } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
// reports/ is generated output (a fresh clone has only its README): not a place a citation can be checked.
const TOP = ['sims', 'harness', 'drivers', 'suites', 'docs', 'fixtures', 'bench', '.ci'];

/** A cited path: under one of the top folders, ending in a file extension or a slash (a folder). */
const CITED = new RegExp(String.raw`(?<![\w./+-])((?:${TOP.map((t) => t.replace('.', '\\.')).join('|')})/[\w./+-]*)`, 'g');
/** A path relative to the citing file (one or two dots, a slash, a name with an extension). */
const RELATIVE = /(?<![\w./-])(\.\.?\/[\w./-]*\.(?:ts|mjs|cjs|md|json))(?![\w/-])/g;

/** The text of a TypeScript or JavaScript file's comments (string literals are data: a test names paths it makes up). */
export function commentText(source: string): string {
  const out: string[] = [];
  let i = 0;
  const n = source.length;
  while (i < n) {
    const c = source[i]!;
    const d = source[i + 1];
    if (c === '/' && d === '/') {
      const end = source.indexOf('\n', i);
      out.push(source.slice(i + 2, end < 0 ? n : end));
      i = end < 0 ? n : end;
    } else if (c === '/' && d === '*') {
      const end = source.indexOf('*/', i + 2);
      out.push(source.slice(i + 2, end < 0 ? n : end));
      i = end < 0 ? n : end + 2;
    } else if (c === "'" || c === '"' || c === '`') {
      // Skip the literal (template substitutions are code, but never hold comments that cite files here).
      i++;
      while (i < n && source[i] !== c) i += source[i] === '\\' ? 2 : 1;
      i++;
    } else i++;
  }
  return out.join('\n');
}

export function citations(text: string, file: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(CITED)) {
    const p = m[1]!.replace(/\.+$/, ''); // a sentence's full stop
    if (!/\.[a-z0-9]{1,7}$|\/$/.test(p)) continue; // neither a file nor a folder: prose such as the harness/environment
    found.push(p);
  }
  for (const m of text.matchAll(RELATIVE)) found.push(normalize(join(dirname(file), m[1]!)));
  return found;
}

test('the comment scanner reads comments and passes over string literals', () => {
  const src = `// see sims/a.ts\nconst x = 'sims/not-a-citation.ts'; /* and docs/b.md */ const y = "// sims/no.ts";\n`;
  expect(citations(commentText(src), 'harness/x.ts').sort()).toEqual(['docs/b.md', 'sims/a.ts']);
  expect(citations('the harness/environment broke; see ../oracle/json.ts and sims/olp/', 'harness/report/x.ts')).toEqual(['sims/olp/', 'harness/oracle/json.ts']);
});

test('every file cited in a comment or a document exists', () => {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
  const missing: string[] = [];
  for (const f of files) {
    const md = f.endsWith('.md');
    if (!md && !/\.(ts|mjs|cjs)$/.test(f)) continue;
    if (!existsSync(join(ROOT, f))) continue; // deleted in the working tree
    const text = readFileSync(join(ROOT, f), 'utf8');
    const lines = (md ? text : commentText(text)).split('\n');
    for (const line of lines) for (const p of citations(line, f)) if (!existsSync(join(ROOT, p))) missing.push(`${f}: ${p}`);
  }
  expect(missing).toEqual([]);
});
