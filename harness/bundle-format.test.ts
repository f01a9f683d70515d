// The bundles the harness builds under node_modules/.cache say what kind of module each file is. Node looks
// for a package.json no further up than the nearest node_modules directory; without one in the bundle
// directory, a .js file has no declared format and every process or worker thread that loads it parses it
// twice (first as CommonJS, to detect its module syntax). Asked here the way node's own loader decides:
// the format its default resolver gives each file, read by a resolve hook in a fresh process.

import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { namedOrBuiltBundle, type Prebuilt } from './targets/reference.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The format node's default resolver gives each file (null: none declared, node detects it when loading). */
function formats(files: string[]): Record<string, string | null> {
  // Resolving is enough: nothing is loaded or run. The hook keeps what the default resolver answered for
  // each file and hands it back as a module of its own.
  const hooks = `const seen = {};
export async function resolve(s, c, next) {
  if (s === 'hil:formats') return { url: s, shortCircuit: true };
  const r = await next(s, c);
  seen[r.url] = r.format ?? null;
  return r;
}
export async function load(u, c, next) {
  if (u === 'hil:formats') return { format: 'module', source: 'export default ' + JSON.stringify(JSON.stringify(seen)), shortCircuit: true };
  return next(u, c);
}`;
  const script = `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));
for (const f of ${JSON.stringify(files.map((f) => pathToFileURL(f).href))}) import.meta.resolve(f);
process.stdout.write((await import('hil:formats')).default);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  expect(r.stderr).toBe('');
  const seen = JSON.parse(r.stdout) as Record<string, string | null>;
  return Object.fromEntries(
    files.map((f) => {
      const url = pathToFileURL(f).href;
      return [f, url in seen ? seen[url]! : 'not resolved'];
    }),
  );
}

let built: Prebuilt | undefined;
let dir = '';
beforeAll(async () => {
  built = await namedOrBuiltBundle();
  dir = built.dir;
}, 120_000);
afterAll(async () => {
  await built?.remove();
});

test("the run's bundles of the reference programs are ES modules by their directory's package.json, the planning process's CommonJS", () => {
  const js = readdirSync(dir).filter((f) => f.endsWith('.js'));
  expect(js).toEqual(expect.arrayContaining(['main.js', 'olp.js', 'planner.js', 'config.js', 'core-worker.js']));
  const got = formats([...js, 'planner-child.cjs'].map((f) => join(dir, f)));
  expect(got).toEqual(Object.fromEntries([...js.map((f) => [join(dir, f), 'module']), [join(dir, 'planner-child.cjs'), 'commonjs']]));
});

test("the hil command's bundle is ES modules by its directory's package.json", () => {
  const env: NodeJS.ProcessEnv = { ...process.env, HIL_CLI_TRACE: '1' };
  delete env.HIL_CLI_BUNDLE;
  const r = spawnSync(process.execPath, [join(ROOT, 'harness', 'bin', 'hil.mjs'), '--version'], { cwd: ROOT, env, encoding: 'utf8' });
  expect(r.status).toBe(0);
  const cli = /^hil: bundle (\/\S+cli\.js)$/m.exec(r.stderr)?.[1];
  expect(cli).toBeDefined();
  const chunks = readdirSync(join(cli!, '..')).filter((f) => f.endsWith('.js'));
  expect(chunks.length).toBeGreaterThan(1);
  const got = formats(chunks.map((f) => join(cli!, '..', f)));
  expect(Object.values(got).every((f) => f === 'module')).toBe(true);
});
