// Worker threads do not inherit the TypeScript loader of their parent on Node 20; register it here.
import { register } from 'tsx/esm/api';

register();
await import('./fake-worker.ts');
