// ProcessStatus helpers (document 1 part 2 "Observation types"; field names beyond those documented
// follow docs/profile.md "Describe and Status fields").

import { HarnessError } from '../errors.ts';
import { lateness } from '../lateness.ts';
import type { ControlClient } from './control.ts';
import { pollPause } from './poll.ts';

export interface AxisView {
  id: string;
  ready: boolean;
  enabled: boolean;
  ds402_state: string;
  fault: boolean;
  error_code: bigint;
  position: number | bigint;
  pdo_fresh: boolean;
  online: boolean;
}

export interface StatusView {
  now_host_ns: bigint;
  daemon_incarnation: string;
  core: {
    armed: bigint;
    home_valid_mask: bigint;
    safety_fault_mask: bigint;
    home_epoch: bigint;
    axis_enable_mask: bigint;
    execution_fault_reasons: bigint;
    io_armed: bigint;
    io_output_word: bigint;
  } | null;
  commissioning: { phase: string };
  axes: AxisView[];
}

export async function readStatus(client: ControlClient): Promise<StatusView> {
  const r = await client.status();
  if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `status refused: ${r.status} ${r.reply.error}`, { detail: { status: r.status, label: r.label } });
  return r.reply.data as unknown as StatusView;
}

/**
 * Poll status until `pred` holds; returns the matching status or the last one read. The timeout is the
 * harness's patience, not a documented bound, and the host's share of the wait does not use it up: time
 * the harness's own loop stalled and time the target's process on this host waited to run
 * (harness/lateness.ts) are added back, up to ten times the timeout, so a loaded host makes the wait
 * longer rather than the change look missing.
 */
export async function waitStatus(client: ControlClient, pred: (s: StatusView) => boolean, timeoutMs = 3_000): Promise<StatusView> {
  const from = performance.now();
  for (;;) {
    const s = await readStatus(client);
    if (pred(s)) return s;
    const now = performance.now();
    if (now - from > timeoutMs) {
      // Let a sample due now fire first, so that a stall that just ended is counted.
      await lateness.settle();
      const lost = lateness.window(from, now).total_ms + (lateness.targetWait(from, now)?.ms ?? 0);
      if (now - from > Math.min(timeoutMs + lost, timeoutMs * 10)) return s;
    }
    await pollPause(10);
  }
}

export const mask = (indices: number[]): number => indices.reduce((m, i) => m | (1 << i), 0);
