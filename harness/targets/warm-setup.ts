// Setup file of the conformance project (vitest.config.ts setupFiles, after harness/nice.ts, so a host
// started here runs at the file's nice value): on the replay target every test's stack is a session of a
// stack host (harness/targets/stack-host.ts), and a worker that has fewer than two idle hosts starts them
// now, while vitest collects the file, instead of inside the first test that opens a stack or a variant
// beside its own (docs/recording.md "Stack hosts"). Files after the first find the hosts their worker kept;
// other targets start nothing here.

import { warmHosts } from './stack-host.ts';

// Each host also makes its paced replay core's thread before its first session (sims/sessions.ts).
if (process.env.HIL_TARGET === 'replay') warmHosts(2, 'recorded');
