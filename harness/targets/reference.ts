// The reference system's entry points. The harness starts them as processes and never imports them
// (DESIGN.md rule 1); this module is the only place outside sims/ that names them.

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The reference stack (`hil serve`): control service and core on a bus driver. */
export const STACK_ENTRY = join(ROOT, 'sims', 'main.ts');
/** The machine configuration compiler (`hil config`, document 3 part 2). */
export const CONFIG_ENTRY = join(ROOT, 'sims', 'config', 'main.ts');
/** Node arguments that run a TypeScript entry point (tsx, no build step). */
export const TS_NODE_ARGS: readonly string[] = ['--import', import.meta.resolve('tsx')];
/** Environment variable through which the reference stack finds its anchor store. */
export const ANCHOR_DIR_ENV = 'CELL_ANCHOR_DIR';
