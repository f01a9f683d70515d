// The remote listener's reply bound (document 1 part 8: "65 s write a reply"), read as docs/profile.md
// says: a connection whose request is being answered is closed once nothing has moved on it for 65 s (no
// byte read from the client, none taken by the kernel toward it).
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

/** Bytes the kernel has taken from `s`: handed to the socket, less what still waits in Node's buffer and libuv's queue. */
function delivered(s: Socket): number {
  // `_handle.writeQueueSize` is libuv's count of bytes not yet taken by the kernel, the figure Node's own
  // timeout reads; no public property tells bytes queued from bytes gone.
  const queued = (s as unknown as { _handle?: { writeQueueSize?: number } })._handle?.writeQueueSize ?? 0;
  return s.bytesWritten - s.writableLength - queued;
}

/**
 * What has moved on a connection: bytes read from the client, or bytes the client's side took. Bytes the
 * service only adds to a queue that does not drain (a stream's keep-alive comments to a client that
 * stopped reading) are no progress: counted as such, a stalled stream would be kept, its queue growing.
 * TLS encrypts into the TCP socket's queue, so that socket (`raw`) is where a reply leaves.
 */
function signature(s: Socket, raw: Socket | undefined): string {
  return `${delivered(raw ?? s)}:${s.bytesRead}`;
}

export class ReplyWatch {
  private readonly watched = new Map<Socket, Watched>();
  private readonly hooked = new WeakSet<Socket>();
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
    // Once per connection: a kept-alive one answers request after request.
    if (!this.hooked.has(s)) {
      this.hooked.add(s);
      s.once('close', () => this.forget(s));
    }
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
