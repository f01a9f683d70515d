// ProcessStatus helpers (document 1 part 2 "Observation types"; field names beyond those documented
// follow docs/profile.md "Describe and Status fields").

import { HarnessError } from '../errors.ts';
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

/** Poll status until `pred` holds; returns the matching status or the last one read. */
export async function waitStatus(client: ControlClient, pred: (s: StatusView) => boolean, timeoutMs = 3_000): Promise<StatusView> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const s = await readStatus(client);
    if (pred(s) || Date.now() > until) return s;
    await pollPause(10);
  }
}

export const mask = (indices: number[]): number => indices.reduce((m, i) => m | (1 << i), 0);
