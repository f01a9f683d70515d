// The bench box thread's entry (harness/benchbox/thread.ts starts it). A worker thread does not inherit the
// test runner's TypeScript loader on Node 20: register tsx here, then run the thread's body
// (harness/benchbox/thread-worker.ts), which uses the client, the simulated box and the protocol as they are.
import { register } from 'tsx/esm/api';

register();
await import('./thread-worker.ts');
