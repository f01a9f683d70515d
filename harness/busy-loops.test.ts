import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { startBusyLoops } from './busy-loops.ts';
import { pidAlive } from './pid-alive.ts';

/** User-mode CPU ticks of a process (/proc/PID/stat field 14). */
const userTicks = (pid: number): number => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[11]);
/** Polls until `ok` holds; false when it never did within the bound (a generous one: the machines are shared). */
async function until(ok: () => boolean, boundMs: number): Promise<boolean> {
  const end = Date.now() + boundMs;
  while (Date.now() < end) {
    if (ok()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return ok();
}

describe('busy loops beside a run (hil run --busy-loops)', () => {
  it('each loop spins on a core until stopped, and is gone once stop resolves', async () => {
    const loops = startBusyLoops(2, 60_000);
    expect(loops.pids).toHaveLength(2);
    for (const pid of loops.pids) {
      expect(pidAlive(pid)).toBe(true);
      expect(await until(() => userTicks(pid) > 0, 20_000)).toBe(true);
    }
    await loops.stop();
    for (const pid of loops.pids) expect(pidAlive(pid)).toBe(false);
  });

  it('a loop ends by itself at its time limit', async () => {
    const loops = startBusyLoops(1, 200);
    const pid = loops.pids[0]!;
    expect(await until(() => !pidAlive(pid), 30_000)).toBe(true);
    await loops.stop();
  });

  it('a loop ends by itself when the process that started it is gone (a killed hil run leaves none)', async () => {
    const parent = spawn(
      process.execPath,
      ['--import', 'tsx', '-e', "import('./harness/busy-loops.ts').then((m) => { const b = m.startBusyLoops(1, 600000); process.stdout.write(String(b.pids[0])); process.exit(0); })"],
      { cwd: new URL('..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    parent.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await once(parent, 'exit');
    const pid = Number(out);
    expect(Number.isInteger(pid) && pid > 0).toBe(true);
    expect(await until(() => !pidAlive(pid), 30_000)).toBe(true);
  });
});
