// The nine-axis fixture machine compiled in process, for the core's unit tests (no digest directory); a core
// set up the way a paced replay runs it is sims/replay/test-core.ts.

import { readFileSync } from 'node:fs';
import { compileMachine } from '../config/compile.ts';
import type { CompiledMachine } from '../config/types.ts';

export function nineAxisMachine(): CompiledMachine {
  return { ...compileMachine(readFileSync(new URL('../../fixtures/machines/nine-axis.json', import.meta.url), 'utf8')).machine, dir: '' };
}
