// The socket directory of one control service (document 1 part 1 "Transports": file permissions are the
// authentication). Two things the service owns there, whatever the caller did:
//
// - Exclusive use. One service per directory: a second one would replace control.sock, take the clients
//   of the first and, stopping, delete the first one's sockets while it runs on unreachable. A lock file
//   names the owner's pid (and its start time, where /proc tells it, so a reused pid is not taken for the
//   owner); a lock whose owner is gone (kill -9, a crash, a reboot) is stale and taken over.
// - Modes. The directory and public/ are 0750 and the sockets 0660 (control.sock, jog.sock: the group
//   allowed to command the cell may also send jog datagrams), the private test channel 0700/0600, set
//   with chmod after creating, never left to the caller's umask (docs/profile.md "Sockets").

import { chmod, link, lstat, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const DIR_MODE = 0o750;
export const SOCKET_MODE = 0o660;
/** The lock file's name in the socket directory. */
export const LOCK_NAME = 'serve.lock';

/** Start-up refused: the directory is served by another live service, or unfit. `exitCode` is hil serve's. */
export class SocketDirRefused extends Error {
  readonly exitCode = 3;
}

/** The kernel's start time of a process (clock ticks since boot, /proc/PID/stat field 22), or '' unknown. */
function startTimeOf(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

function alive(pid: number, start: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false; // ESRCH: no such process
  }
  // The pid exists: the owner, unless it was reused by a process started later.
  const now = startTimeOf(pid);
  return start === '' || now === '' || now === start;
}

/**
 * Create (or take) the socket directory with its modes and lock it for this process. Refuses a directory
 * that others may write (a sticky or world-writable one like /tmp: anyone could replace the sockets) and
 * one another live service holds. Returns the release.
 */
export async function takeSocketDir(dir: string, hooks: { beforeTakeover?: () => Promise<void> } = {}): Promise<{ release(): Promise<void> }> {
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  const st = await lstat(dir);
  if (!st.isDirectory()) throw new SocketDirRefused(`socket directory ${dir} is not a directory`);
  if ((st.mode & 0o1002) !== 0) throw new SocketDirRefused(`socket directory ${dir} may be written by any user (mode ${(st.mode & 0o7777).toString(8)}): give the service a directory of its own`);
  const lock = join(dir, LOCK_NAME);
  const mine = `${process.pid} ${startTimeOf(process.pid)}\n`;
  for (let attempt = 0; ; attempt++) {
    // The lock appears whole: written under a name of our own, then linked to its name (which fails when
    // it exists), so no other start ever reads it half written.
    const mineFile = `${lock}.${process.pid}`;
    const f = await open(mineFile, 'w', 0o640);
    try {
      await f.writeFile(mine);
      await f.chmod(0o640);
    } finally {
      await f.close();
    }
    try {
      await link(mineFile, lock);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    } finally {
      await unlink(mineFile).catch(() => undefined);
    }
    const text = await readFile(lock, 'latin1').catch(() => '');
    const [pidText = '', start = ''] = text.trim().split(' ');
    const pid = /^[1-9][0-9]{0,9}$/.test(pidText) ? Number(pidText) : 0;
    if (pid > 0 && alive(pid, start)) {
      throw new SocketDirRefused(`socket directory ${dir} is served by another hil serve (pid ${pid}); stop it first or give another --socket-dir`);
    }
    if (attempt >= 3) throw new SocketDirRefused(`socket directory ${dir}: cannot take the lock ${lock}`);
    await hooks.beforeTakeover?.();
    // Stale: its owner is gone. Another start may have judged it stale too and already replaced it with
    // its own lock since we read it, so it is not simply removed (that would remove the other start's
    // lock, and both would serve): it is moved aside in one step, and only when what was moved is the
    // stale lock we read does it stay removed; a live one is put back and judged again.
    const aside = `${lock}.stale.${process.pid}`;
    try {
      await rename(lock, aside);
    } catch {
      continue; // gone already: another start took it over, or its owner released it
    }
    const moved = await readFile(aside, 'latin1').catch(() => '');
    if (moved !== text) await link(aside, lock).catch(() => undefined);
    await unlink(aside).catch(() => undefined);
  }
  // The modes, whatever the umask made of them: the directory before any socket is bound in it. A setgid
  // bit the operator gave it stays (the sockets then get the directory's group).
  await chmod(dir, DIR_MODE | (st.mode & 0o2000));
  return {
    async release() {
      const text = await readFile(lock, 'latin1').catch(() => '');
      if (text === mine) await unlink(lock).catch(() => undefined);
    },
  };
}
