// The paced replay's worker entry (sims/core-loops.ts chooses it for the clock 'recorded'): the core's
// thread plumbing (sims/core/thread.ts) with the paced loop (worker-loop.ts) instead of the core's own.

import { serveIncarnations } from '../core/thread.ts';
import { runPaced } from './worker-loop.ts';

serveIncarnations(runPaced);
