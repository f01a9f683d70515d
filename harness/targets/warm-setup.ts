// Setup file of the conformance project (vitest.config.ts setupFiles, after harness/nice.ts, so whatever it
// starts runs at the file's nice value): while vitest collects a file, the worker does what the target it
// runs against asks to have done before the file's first tests (TargetDescriptor.warmWorker: on the replay
// target, idle stack hosts for the per-test stacks; docs/recording.md "Stack hosts"). Other targets ask
// nothing. This file names no target.

import { targetFromEnv } from './index.ts';

targetFromEnv().warmWorker();
