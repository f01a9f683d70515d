// The benches' process reaper: a small Python program (prctl through ctypes, PR_SET_CHILD_SUBREAPER) that
// starts a command in a directory, adopts every process the command leaves behind, waits for all of them,
// and prints the whole tree's CPU on stderr as one `REAPER {...}` line (wall_s of the command itself,
// user_s and sys_s of every reaped descendant, whether the subreaper took, the command's exit status).
// Node cannot count the CPU of grandchildren that outlive their parents; the kernel does, for a reaper.

/** Arguments for `python3`: `[...reaperArgs(dir, cmd)]` runs cmd in dir under the reaper. */
export function reaperArgs(dir: string, cmd: readonly string[]): string[] {
  return ['-c', REAPER_PY, dir, ...cmd];
}

/** The reaper's figures from its stderr, or undefined when it printed none (no python3, a crash). */
export function reaperFigures(stderr: string): { wall_s: number | null; user_s: number; sys_s: number; subreaper: boolean; status: number | null } | undefined {
  const m = /REAPER (\{.*\})/.exec(stderr);
  return m ? JSON.parse(m[1]!) : undefined;
}

const REAPER_PY = `
import ctypes, json, os, sys, time
ok = ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    os.chdir(sys.argv[1])
    os.execvp(sys.argv[2], sys.argv[2:])
wall = None
status = None
while True:
    try:
        p, st = os.wait()
    except ChildProcessError:
        break
    if p == pid:
        wall = time.monotonic() - t0
        status = os.waitstatus_to_exitcode(st)
t = os.times()
sys.stderr.write("\\nREAPER " + json.dumps({"wall_s": wall, "user_s": t.children_user, "sys_s": t.children_system, "subreaper": ok, "status": status}) + "\\n")
`;
