// The remote listener's reply bound (document 1 part 8: "65 s write a reply"), read as docs/profile.md
// says: a connection whose request is being answered is closed once nothing has moved on it for 65 s (no
// byte read, none handed to the socket, none leaving the socket's write queue for the kernel).
//
// Node's own socket timeout (`server.timeout`) cannot give that bound on a stalled write: when it expires
// and the write queue differs from what it was at the last write, it skips that expiry and waits a whole
// period more, so a reply whose client stopped reading is closed after twice the period (measured: 130 s
// for 65 s). This watch checks every connection with a request in flight at a short interval instead.

import type { Socket } from 'node:net';

interface Watched {
  /** The TCP socket under a TLS one: its write queue is where the encrypted reply waits for the kernel. */
  raw: Socket | undefined;
  sig: string;
  since: number;
}

/** What has moved on a connection: a change of any figure is progress. */
function signature(s: Socket, raw: Socket | undefined): string {
  // `_handle.writeQueueSize` is libuv's count of bytes not yet taken by the kernel, the figure Node's own
  // timeout reads; TLS encrypts a whole reply into the TCP socket's queue at once, so only that queue
  // shows a slow client's progress.
  const queued = (raw as unknown as { _handle?: { writeQueueSize?: number } } | undefined)?._handle?.writeQueueSize ?? -1;
  const own = (s as unknown as { _handle?: { writeQueueSize?: number } })._handle?.writeQueueSize ?? -1;
  return `${queued}:${own}:${s.writableLength}:${s.bytesRead}:${s.bytesWritten}`;
}

export class ReplyWatch {
  private readonly watched = new Map<Socket, Watched>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly boundMs: number,
    private readonly checkMs: number,
    private readonly closed: (s: Socket, stalledMs: number) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A request arrived on `s`: watched until its reply closes (finished, or the connection gone). */
  watch(s: Socket, raw: Socket | undefined, reply: { once(event: 'close', f: () => void): unknown }): void {
    this.watched.set(s, { raw, sig: signature(s, raw), since: this.now() });
    reply.once('close', () => this.forget(s));
    s.once('close', () => this.forget(s));
    if (!this.timer) {
      this.timer = setInterval(() => this.check(), this.checkMs);
      this.timer.unref();
    }
  }

  /** One look at every watched connection (the interval's work; tests call it with their own clock). */
  check(): void {
    const now = this.now();
    for (const [s, w] of this.watched) {
      const sig = signature(s, w.raw);
      if (sig !== w.sig) {
        w.sig = sig;
        w.since = now;
      } else if (now - w.since >= this.boundMs) {
        this.forget(s);
        this.closed(s, now - w.since);
        s.destroy();
      }
    }
  }

  get size(): number {
    return this.watched.size;
  }

  stop(): void {
    this.watched.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private forget(s: Socket): void {
    this.watched.delete(s);
    if (this.watched.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
