// The types of harness/thread-nice.mjs.

/**
 * What raiseThreadNice did: the thread (its kernel id, null where threads have no nice value of their own),
 * the value it had, the one it has, and why the wanted one was refused. `from` and `nice` are null only where
 * the thread never said (it exited first).
 */
export interface ThreadNiceTaken {
  tid: number | null;
  from: number | null;
  nice: number | null;
  error?: string;
}

/** Raise the calling thread to nice `wanted` when it runs niced above it (Linux; never lowers). */
export function raiseThreadNice(wanted: number): ThreadNiceTaken;

/** Why setpriority refused: the system error's code (EACCES), else the message. */
export function niceErrorCode(e: unknown): string;
