// `hil cleanroom`: the clean-room checks of a server written from the documents alone.

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError, wantsHelp } from './common.ts';

export async function cleanroom(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'cleanroom')) return 0;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { 'socket-dir': { type: 'string' }, 'lease-ceiling-ms': { type: 'string' }, 'lifeline-stdin': { type: 'boolean', default: false }, update: { type: 'boolean', default: false }, planner: { type: 'boolean', default: false }, 'store-dir': { type: 'string' }, port: { type: 'string' } },
  });
  if (positionals[0] === 'check-olp') {
    const { checkCleanroomOlp } = await import('../cleanroom/check.ts');
    const suites = positionals.slice(1);
    return checkCleanroomOlp({ update: values.update, ...(suites.length ? { suites } : {}) });
  }
  // The clean-room weld planner (document 2): `cleanroom serve --planner --store-dir DIR [--port P]`, `cleanroom check --planner`.
  if (values.planner) {
    if (positionals[0] === 'check') {
      const { checkCleanroomPlanner } = await import('../cleanroom/planner-check.ts');
      const suites = positionals.slice(1);
      return checkCleanroomPlanner({ update: values.update, ...(suites.length ? { suites } : {}) });
    }
    if (positionals[0] !== 'serve' || positionals.length !== 1 || !values['store-dir']) throw new UsageError('expected: cleanroom serve --planner --store-dir DIR [--port P], or cleanroom check --planner');
    const port = values.port === undefined ? undefined : Number(values.port);
    if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) throw new UsageError('--port takes 0..65535');
    // The clean-room planner runs as its authors start it (harness/cleanroom/processes.ts), in the foreground.
    const { plannerArgv } = await import('../cleanroom/processes.ts');
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, plannerArgv({ storeDir: resolve(values['store-dir']), ...(port !== undefined ? { port } : {}) }), { stdio: 'inherit' });
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
    return await new Promise<number>((r) => child.once('exit', (c, s) => r(c ?? (s ? 1 : 0))));
  }
  if (positionals[0] === 'check') {
    if (values['socket-dir'] || values['lease-ceiling-ms'] || values['lifeline-stdin']) throw new UsageError('cleanroom check starts its own service: no serve options');
    const { checkCleanroom } = await import('../cleanroom/check.ts');
    const suites = positionals.slice(1);
    return checkCleanroom({ update: values.update, ...(suites.length ? { suites } : {}) });
  }
  if (positionals[0] !== 'serve' || positionals.length !== 1) throw new UsageError('expected: cleanroom serve --socket-dir DIR, or cleanroom check');
  if (!values['socket-dir']) throw new UsageError('cleanroom serve needs --socket-dir DIR');
  const ceiling = values['lease-ceiling-ms'] === undefined ? undefined : Number(values['lease-ceiling-ms']);
  if (ceiling !== undefined && !(Number.isInteger(ceiling) && ceiling >= 1 && ceiling <= 10_000)) throw new UsageError('--lease-ceiling-ms takes a whole number of ms, 1..10000');
  // Test equipment of the harness (like the simulated bench box), so it runs in this process.
  const { serveCleanroom } = await import('../cleanroom/service.ts');
  const code = await serveCleanroom({ socketDir: resolve(values['socket-dir']), ...(ceiling !== undefined ? { leaseCeilingMs: ceiling } : {}), lifelineStdin: values['lifeline-stdin'] });
  // Stopped (signal or lifeline): exit now, whatever the loader or stdin still hold open.
  process.exit(code);
}
