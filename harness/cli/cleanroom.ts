// `hil cleanroom`: the clean-room checks of a server written from the documents alone.

import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError, wantsHelp } from './common.ts';

export async function cleanroom(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'cleanroom')) return 0;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      'socket-dir': { type: 'string' }, 'lease-ceiling-ms': { type: 'string' }, 'lifeline-stdin': { type: 'boolean', default: false }, update: { type: 'boolean', default: false }, planner: { type: 'boolean', default: false }, 'store-dir': { type: 'string' }, port: { type: 'string' },
      'remote-listen': { type: 'string' }, 'remote-ca': { type: 'string' }, 'remote-cert': { type: 'string' }, 'remote-key': { type: 'string' }, 'remote-crl': { type: 'string' }, 'pair-id': { type: 'string' }, 'link-profile': { type: 'string' }, 'log-file': { type: 'string' },
      'remote-jog-max-uncertainty-ns': { type: 'string' }, 'remote-jog-drift-ppb': { type: 'string' }, 'remote-jog-calibration-max-age-ns': { type: 'string' },
    },
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
    if (values['socket-dir'] || values['lease-ceiling-ms'] || values['lifeline-stdin'] || REMOTE_FLAGS.some((f) => values[f] !== undefined)) throw new UsageError('cleanroom check starts its own service: no serve options');
    const { checkCleanroom } = await import('../cleanroom/check.ts');
    const suites = positionals.slice(1);
    return checkCleanroom({ update: values.update, ...(suites.length ? { suites } : {}) });
  }
  if (positionals[0] !== 'serve' || positionals.length !== 1) throw new UsageError('expected: cleanroom serve --socket-dir DIR, or cleanroom check');
  if (!values['socket-dir']) throw new UsageError('cleanroom serve needs --socket-dir DIR');
  const ceiling = values['lease-ceiling-ms'] === undefined ? undefined : Number(values['lease-ceiling-ms']);
  if (ceiling !== undefined && !(Number.isInteger(ceiling) && ceiling >= 1 && ceiling <= 10_000)) throw new UsageError('--lease-ceiling-ms takes a whole number of ms, 1..10000');
  const remote = remoteOptions(values);
  const { NO_TICKETS_CNF } = await import('../cleanroom/remote.ts');
  // TLS session tickets are off only under the clean room's OpenSSL configuration, which node reads at start
  // (harness/cleanroom/remote.ts): without it, this command runs again in a node that has it.
  if (remote && !process.execArgv.some((a) => a.startsWith('--openssl-config')) && !process.env.OPENSSL_CONF) return again([`--openssl-config=${NO_TICKETS_CNF}`, ...process.execArgv], args);
  // Test equipment of the harness (like the simulated bench box), so it runs in this process.
  const { serveCleanroom } = await import('../cleanroom/service.ts');
  const logFile = values['log-file'] === undefined ? undefined : resolve(values['log-file']);
  const code = await serveCleanroom({
    socketDir: resolve(values['socket-dir']),
    ...(ceiling !== undefined ? { leaseCeilingMs: ceiling } : {}),
    ...(values['pair-id'] !== undefined ? { pairId: values['pair-id'] } : {}),
    ...(remote ? { remote } : {}),
    ...(logFile ? { log: (line: string) => appendFileSync(logFile, `${line}\n`) } : {}),
    lifelineStdin: values['lifeline-stdin'],
  });
  // Stopped (signal or lifeline): exit now, whatever the loader or stdin still hold open.
  process.exit(code);
}

/**
 * The remote jog clock flags (document 1 part 5 item 6: default 0, all three nonzero or every remote jog
 * frame is refused). The clean room serves no jog lane (Describe reports begin_jog unimplemented), so it
 * takes them, checks them as decimal uint64 values beside --remote-listen, and uses them for nothing.
 */
const JOG_FLAGS = ['remote-jog-max-uncertainty-ns', 'remote-jog-drift-ppb', 'remote-jog-calibration-max-age-ns'] as const;

/** The remote listener's flags (document 1 part 5 item 6), the link profile its header bound follows (part 8), its log file. */
const REMOTE_FLAGS = ['remote-listen', 'remote-ca', 'remote-cert', 'remote-key', 'remote-crl', 'pair-id', 'link-profile', 'log-file', ...JOG_FLAGS] as const;

/**
 * The remote listener the flags ask for, or undefined. `--remote-listen` takes HOST:PORT, HOST or :PORT
 * (part 1: host 127.0.0.1 and port 8443 by default; port 0 picks a free one) and needs the four files and
 * `--pair-id` (part 5 item 6); a usage error (exit status 2) otherwise.
 */
function remoteOptions(v: Partial<Record<(typeof REMOTE_FLAGS)[number], string | boolean>>) {
  const str = (f: (typeof REMOTE_FLAGS)[number]) => (typeof v[f] === 'string' ? (v[f] as string) : undefined);
  const listen = str('remote-listen');
  const files = { ca: str('remote-ca'), cert: str('remote-cert'), key: str('remote-key'), crl: str('remote-crl') };
  const pairId = str('pair-id');
  if (pairId !== undefined && !/^[A-Za-z0-9_.:-]+$/.test(pairId)) throw new UsageError(`--pair-id ${JSON.stringify(pairId)}: a token of [A-Za-z0-9_.:-]`);
  const profile = str('link-profile');
  if (profile !== undefined && profile !== 'lan' && profile !== 'internet') throw new UsageError('--link-profile takes lan or internet');
  for (const f of JOG_FLAGS) {
    const value = str(f);
    if (value === undefined) continue;
    if (listen === undefined) throw new UsageError(`--${f} needs --remote-listen`);
    if (!/^[0-9]{1,20}$/.test(value) || BigInt(value) >= 1n << 64n) throw new UsageError(`--${f} ${JSON.stringify(value)}: a decimal uint64`);
  }
  if (listen === undefined) {
    if (Object.values(files).some((f) => f !== undefined) || profile !== undefined) throw new UsageError('--remote-ca, --remote-cert, --remote-key, --remote-crl and --link-profile need --remote-listen');
    return undefined;
  }
  const missing = Object.entries(files).filter(([, f]) => f === undefined).map(([k]) => `--remote-${k}`);
  if (pairId === undefined) missing.push('--pair-id');
  if (missing.length) throw new UsageError(`--remote-listen needs ${missing.join(', ')}`);
  const m = /^(?:(\[[0-9a-fA-F:]+\]|[^:[\]]+))?(?::([0-9]{1,5}))?$/.exec(listen);
  const port = m?.[2] === undefined ? 8443 : Number(m[2]);
  if (!m || listen === '' || port > 65535) throw new UsageError(`--remote-listen ${listen}: HOST:PORT, HOST or :PORT`);
  const host = (m[1] ?? '127.0.0.1').replace(/^\[(.*)\]$/, '$1');
  return {
    host,
    port,
    files: { ca: resolve(files.ca!), cert: resolve(files.cert!), key: resolve(files.key!), crl: resolve(files.crl!) },
    linkProfile: (profile ?? 'lan') as 'lan' | 'internet',
  };
}

/** This command once more in a node started with `nodeArgs`, its stdio, signals and exit status passed through. */
function again(nodeArgs: string[], args: string[]): Promise<number> {
  const child = spawn(process.execPath, [...nodeArgs, process.argv[1]!, 'cleanroom', ...args], { stdio: 'inherit' });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
  return new Promise<number>((r) => child.once('exit', (c, s) => r(c ?? (s ? 1 : 0))));
}
