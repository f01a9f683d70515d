// The `hil` command compiled once per content of its sources, so a call does not start tsx's loader and
// transform the harness again (about 0.3 s of CPU for tsx's loader and 0.2-0.5 s more for the modules a verb
// loads through it, on each of the many `hil` calls of a test run or a user's script).
//
// harness/cli.ts and every project file it imports, directly or through a verb's lazy import, are bundled by
// esbuild (the transform tsx itself uses) into node_modules/.cache/hil-cli/build-<digest>/, one chunk per
// lazily loaded verb, packages left to node's own resolution from the checkout's node_modules. Beside the
// build, a pointer per checkout records the SHA-256 of each source exactly as esbuild was given it (read by
// the plugin below, so an edit made while the build ran is seen at the next call) and of tsconfig.json. A
// call rehashes those files and runs the build only when every one still matches; any difference, a file
// gone, or a pointer or build that cannot be read makes a new build. A build that fails (a syntax error
// being typed) returns nothing: harness/bin/hil.mjs then loads the sources through tsx as before, which
// reports the error where it is. Plain JavaScript: it runs before any TypeScript loader exists.

import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** This file: how the bundle is made is one of its inputs (an edit to the options below is a new build). */
const SELF = fileURLToPath(import.meta.url);
/** A build no call has used for this long is removed when a new build is made (a long `hil nightly` touches its own at start). */
const UNUSED_MS = 2 * 86_400_000;
/**
 * Packages bundled into the chunk that imports them, with everything they import: the certificate library is
 * a few hundred CommonJS files that Node would otherwise resolve and load one by one on each `hil certs`
 * call (most of what the call cost). Every other package stays external.
 */
const BUNDLED = new Set(['@peculiar/x509', 'reflect-metadata']);
/** What esbuild is told per file type of the project's own sources. */
const LOADERS = { '.ts': 'ts', '.mts': 'ts', '.js': 'js', '.mjs': 'js', '.json': 'json' };
/** The package.json of a bundle directory: its .js files are ES modules. */
const MODULE_PACKAGE = '{ "type": "module" }\n';

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

export function cacheDir(root) {
  return join(root, 'node_modules', '.cache', 'hil-cli');
}

/** One pointer per checkout (a copy of the checkout may share node_modules with it, and so the cache directory). */
function pointerFile(root) {
  return join(cacheDir(root), `current-${sha256(root).slice(0, 16)}.json`);
}

/**
 * The entry of the bundle built from this checkout's sources as they are now, or undefined when there is
 * none (never built, a source changed, the build is gone). Touches the build so that pruning keeps it.
 */
export function freshBundle(root) {
  let pointer;
  try {
    pointer = JSON.parse(readFileSync(pointerFile(root), 'utf8'));
  } catch {
    return undefined;
  }
  if (pointer.root !== root || typeof pointer.build !== 'string' || typeof pointer.inputs !== 'object') return undefined;
  for (const [rel, digest] of Object.entries(pointer.inputs)) {
    let bytes;
    try {
      bytes = readFileSync(join(root, rel));
    } catch {
      return undefined;
    }
    if (sha256(bytes) !== digest) return undefined;
  }
  const dir = join(cacheDir(root), pointer.build);
  try {
    const now = new Date();
    utimesSync(dir, now, now);
    statSync(join(dir, 'cli.js'));
  } catch {
    return undefined;
  }
  return join(dir, 'cli.js');
}

/**
 * Build the bundle of harness/cli.ts from the sources as they are now, record them in this checkout's
 * pointer and return the entry; undefined when the build failed (the caller falls back to tsx).
 */
export async function buildBundle(root) {
  const parent = cacheDir(root);
  let tmp;
  try {
    const { build } = await import('esbuild');
    mkdirSync(parent, { recursive: true });
    tmp = mkdtempSync(join(parent, 'tmp-'));
    const inputs = {};
    // Read before the build: one edited while esbuild runs then differs at the next call.
    inputs['tsconfig.json'] = sha256(readFileSync(join(root, 'tsconfig.json')));
    inputs[relative(root, SELF)] = sha256(readFileSync(SELF));
    await build({
      entryPoints: { cli: join(root, 'harness', 'cli.ts') },
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      // A bundled CommonJS package requires node's own modules: give each ES module chunk a require.
      banner: { js: "import { createRequire as __hilRequire } from 'node:module'; const require = __hilRequire(import.meta.url);" },
      tsconfig: join(root, 'tsconfig.json'),
      outdir: tmp,
      sourcemap: 'linked',
      sourcesContent: false,
      logLevel: 'silent',
      // Each module's import.meta as it would be from its source file (new URL('../..', import.meta.url) and
      // the like), not the bundle's: an identifier per module, declared by the plugin below.
      define: { 'import.meta.url': '__hil_meta_url', 'import.meta.dirname': '__hil_meta_dirname', 'import.meta.filename': '__hil_meta_filename' },
      plugins: [
        {
          name: 'hil-sources',
          setup(b) {
            // Packages: external (node resolves them from the checkout's node_modules at run time), except
            // BUNDLED ones and what they import.
            b.onResolve({ filter: /^[^./]/ }, (a) => {
              if (a.path.startsWith('node:')) return { path: a.path, external: true };
              const name = a.path.startsWith('@') ? a.path.split('/').slice(0, 2).join('/') : a.path.split('/')[0];
              const fromPackage = a.importer.includes(`${sep}node_modules${sep}`);
              return fromPackage || BUNDLED.has(name) ? undefined : { path: a.path, external: true };
            });
            b.onLoad({ filter: /.*/ }, (a) => {
              const loader = LOADERS[extname(a.path)];
              if (!loader || !a.path.startsWith(root) || a.path.includes(`${sep}node_modules${sep}`)) return undefined;
              const bytes = readFileSync(a.path);
              inputs[relative(root, a.path)] = sha256(bytes);
              const text = bytes.toString('utf8');
              if (loader === 'json') return { contents: text, loader };
              // On the first line, so every other line keeps its number in stack traces.
              const meta = `var __hil_meta_url = ${JSON.stringify(pathToFileURL(a.path).href)}, __hil_meta_dirname = ${JSON.stringify(dirname(a.path))}, __hil_meta_filename = ${JSON.stringify(a.path)}; `;
              return { contents: meta + text, loader };
            });
          },
        },
      ],
    });
    // The chunks sit below node_modules, where node finds no package.json of ours and would parse each one
    // twice (first as CommonJS, to detect its module syntax); this one says what they are.
    writeFileSync(join(tmp, 'package.json'), MODULE_PACKAGE);
    const sorted = Object.fromEntries(Object.entries(inputs).sort(([a], [b]) => (a < b ? -1 : 1)));
    const name = `build-${sha256(JSON.stringify({ root, sorted })).slice(0, 20)}`;
    const dir = join(parent, name);
    try {
      renameSync(tmp, dir);
    } catch {
      // The same sources built by another call meanwhile: the same bundle.
      rmSync(tmp, { recursive: true, force: true });
    }
    tmp = undefined;
    const pointer = pointerFile(root);
    const next = `${pointer}.${process.pid}`;
    writeFileSync(next, JSON.stringify({ root, build: name, inputs: sorted }));
    renameSync(next, pointer);
    prune(parent, name);
    return join(dir, 'cli.js');
  } catch (e) {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
    if (process.env.HIL_CLI_TRACE) process.stderr.write(`hil: bundle not built: ${e?.message ?? e}\n`);
    return undefined;
  }
}

/** Remove builds and leftovers nobody has used for UNUSED_MS (a call uses a build: freshBundle touches it). */
function prune(parent, keep) {
  const now = Date.now();
  for (const e of readdirSync(parent)) {
    if (e === keep || !(e.startsWith('build-') || e.startsWith('tmp-'))) continue;
    try {
      if (now - statSync(join(parent, e)).mtimeMs > UNUSED_MS) rmSync(join(parent, e), { recursive: true, force: true });
    } catch {
      // Removed by another call meanwhile.
    }
  }
}
