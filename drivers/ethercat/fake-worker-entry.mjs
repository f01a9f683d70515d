// Worker threads do not inherit the TypeScript loader of their parent on Node 20; register it here.
// First the thread gives back the real-time policy it may have inherited from the core's thread
// (thread-scheduling.mjs): register() starts the loader's hooks thread, which would inherit it in turn.
import { toNormalScheduling } from './thread-scheduling.mjs';
import { register } from 'tsx/esm/api';

toNormalScheduling();
register();
await import('./fake-worker.ts');
