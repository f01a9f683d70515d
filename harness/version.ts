// `hil --version`: the package version and, in a git checkout, the revision the harness runs from (with
// "+dirty" when tracked files differ from it), the same figures a run record keeps under environment.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export function packageVersion(root: string): string {
  try {
    return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** The git revision of root (`+dirty` when tracked files changed), or undefined outside a git checkout. */
export function gitRevisionOf(root: string): string | undefined {
  try {
    const rev = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (!/^[0-9a-f]{40}$/.test(rev)) return undefined;
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return dirty ? `${rev}+dirty` : rev;
  } catch {
    return undefined;
  }
}

/** One line: "hil 0.1.0 (git 889d52b...)" or "hil 0.1.0" where no revision is known. */
export function versionText(root: string): string {
  const rev = gitRevisionOf(root);
  return `hil ${packageVersion(root)}${rev ? ` (git ${rev})` : ''}`;
}
