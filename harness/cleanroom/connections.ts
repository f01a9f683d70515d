// Connection bounds of the clean-room service that Node's HTTP server does not keep as document 1 states
// them: the idle close (part 1 "Transports", part 8 "Idle connection": 90 s) and, on the remote listener,
// the reply write bound (part 8 "Remote HTTP timeouts": 65 s to write a reply). Node closes a kept
// connection one second after its keepAliveTimeout, so the servers set that to 0 and this watch closes it
// instead, at the documented time from the end of the last reply.

import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';

export interface WatchBounds {
  /** Close a connection with no request in flight this long after its last reply ended. */
  idleMs: number;
  /** Cut a connection whose outgoing bytes have stayed queued (never drained) this long; undefined: never. */
  replyMs?: number;
  /** How often the connections are looked at. */
  checkMs: number;
}

interface Watched {
  inFlight: number;
  /** performance.now() when the last reply ended (undefined: before the first, or while one is in flight). */
  idleSince?: number;
  /** performance.now() since when the connection's queue has been found non-empty at every look. */
  queuedSince?: number;
}

/** Watch every connection `server` answers a request on; returns the function that stops the watch. */
export function watchConnections(server: HttpServer | HttpsServer, b: WatchBounds): () => void {
  const watched = new Map<Socket, Watched>();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    let w = watched.get(socket);
    if (!w) {
      w = { inFlight: 0 };
      watched.set(socket, w);
      socket.once('close', () => watched.delete(socket));
    }
    const state = w;
    state.inFlight++;
    state.idleSince = undefined;
    // 'close' comes once the reply has been handed to the connection, or the exchange was cut.
    res.once('close', () => {
      state.inFlight--;
      if (state.inFlight === 0) state.idleSince = performance.now();
    });
  });
  const timer = setInterval(() => {
    const now = performance.now();
    for (const [socket, w] of watched) {
      if (w.inFlight === 0 && w.idleSince !== undefined && now - w.idleSince >= b.idleMs) {
        socket.destroy();
        continue;
      }
      if (b.replyMs === undefined) continue;
      // A reply (or a stream's write) the client is not taking: its bytes stay in the connection's queue.
      if (w.inFlight > 0 && socket.writableLength > 0) {
        w.queuedSince ??= now;
        if (now - w.queuedSince >= b.replyMs) socket.destroy();
      } else w.queuedSince = undefined;
    }
  }, b.checkMs);
  timer.unref();
  return () => clearInterval(timer);
}
