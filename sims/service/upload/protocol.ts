// Messages between the service's main thread and the upload decode worker (worker.ts).

import type { Envelope, PointArrays, UploadCode } from './decoder.ts';

export type ToWorker =
  /**
   * `arena`: decode into this plan arena slot (sims/core/plan-arena.ts), claimed by the main thread; the
   * result's arrays are views of it (shared, not transferred).
   */
  | { t: 'begin'; id: number; axes: number; expectedBytes?: number; arena?: { buffer: SharedArrayBuffer; slot: number } }
  /** Body bytes, transferred (the ArrayBuffer moves to the worker). */
  | { t: 'chunk'; id: number; bytes: Uint8Array }
  | { t: 'end'; id: number }
  | { t: 'abort'; id: number }
  | { t: 'stats'; id: number };

export interface RefusalData {
  code: UploadCode;
  status: 409 | 413;
  label: string;
  detail?: string;
  data?: unknown;
  operation?: string;
}

export type FromWorker =
  /** Bytes decoded so far (flow control), with the chunk's memory handed back for the next batch. */
  | { t: 'ack'; id: number; bytes: number; spare?: ArrayBuffer }
  | { t: 'done'; id: number; request: Envelope; points: PointArrays }
  | { t: 'refused'; id: number; refusal: RefusalData }
  | { t: 'aborted'; id: number }
  | { t: 'stats'; id: number; active: number; heldBytes: number }
  | { t: 'crashed'; id: number; message: string };
