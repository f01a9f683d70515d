// The vitest fixtures every conformance suite uses. Suites get the target from here and never assume
// which one it is; they ask `target.abilities` and Describe, and skip with a stated reason.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as allure from 'allure-js-commons';
import { test as base } from 'vitest';
import { HarnessError } from './errors.ts';
import { Cell } from './clients/cell.ts';
import { waitStatus } from './clients/status.ts';
import type { ControlClient } from './clients/control.ts';
import { stringifyExact } from './oracle/json.ts';
import { openTarget, variantsFromEnv, type Target, type VariantOptions } from './targets/index.ts';
import './trace.ts';

export { expect, describe } from 'vitest';
export { covers, profile } from './trace.ts';

export interface Description {
  [k: string]: unknown;
  binding: { pair_id: string; revision: bigint; configuration_sha256: string; machine_sha256?: string };
  capabilities: Array<{ name: string; state: string; transport: string }>;
  axes: Array<Record<string, unknown> & { id: string }>;
}

const RUN_DIR = process.env.HIL_RUN_DIR ?? join(process.cwd(), 'reports', '.run');

/**
 * A separately started system with the given options (harness/targets/variant.ts), closed at the end of
 * the test. On a target that cannot provide it the test skips with the target's reason; malformed options
 * are an error on every target.
 */
export type VariantOf = (options: VariantOptions) => Promise<Target>;

export const test = base.extend<{
  $file: { target: Target; description: Description };
  $test: { client: ControlClient; cell: Cell; variant: VariantOf; traced: void };
}>({
  target: [
    async ({}, use) => {
      const target = await openTarget();
      try {
        await use(target);
      } finally {
        await target.close();
      }
    },
    { scope: 'file' },
  ],
  description: [
    async ({ target }, use) => {
      const c = target.client();
      const r = await c.describe();
      if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `describe answered ${r.status} ${r.reply.error}`, { detail: { status: r.status, label: r.label } });
      const d = r.reply.data as unknown as Description;
      recordTarget(target, d);
      await use(d);
    },
    { scope: 'file' },
  ],
  client: async ({ target }, use) => {
    await use(target.client());
  },
  cell: async ({ target, description }, use) => {
    const cell = new Cell(target.client(), description.binding);
    try {
      await use(cell);
    } finally {
      // Every test leaves the cell stopped and released (DESIGN.md rule 5).
      await cell.cleanup();
    }
  },
  // Independent of the file's `target`, so a file of variant tests starts no stack it does not use.
  variant: async ({ skip }, use) => {
    const opened: Target[] = [];
    try {
      await use((options) => openVariantOrSkip(variantsFromEnv(), options, skip, opened));
    } finally {
      for (const v of opened.reverse()) await v.close();
    }
  },
  traced: [
    async ({ task }, use) => {
      const meta = task.meta;
      for (const id of meta.covers ?? []) await allure.label('covers', id);
      if (meta.kind) await allure.label('kind', meta.kind);
      await allure.label('target', process.env.HIL_TARGET ?? 'sim');
      await use();
    },
    { auto: true },
  ],
});

/**
 * The `variant` fixture's logic: validate (malformed options throw HIL_ERR_VARIANT_INVALID on every
 * target), skip with the target's reason when it cannot provide the variant, otherwise start it and
 * remember it for closing.
 */
export async function openVariantOrSkip(
  variants: ReturnType<typeof variantsFromEnv>,
  options: VariantOptions,
  skip: (note: string) => never,
  opened: Target[],
): Promise<Target> {
  const why = variants.cannotProvide(options);
  if (why !== undefined) skip(why);
  const v = await variants.open(options);
  opened.push(v);
  return v;
}

/** Leave a note of what the run was attached to, for run.json and the report. */
function recordTarget(target: Target, d: Description): void {
  try {
    mkdirSync(RUN_DIR, { recursive: true });
    writeFileSync(
      join(RUN_DIR, `target-${process.pid}.json`),
      stringifyExact({ name: target.name, driver: target.driver, address: target.address, describe: d }),
    );
  } catch {
    // An output sink never aborts a run.
  }
}

/** Skip unless the target can inject faults, with the reason stated. */
export function needsFaults(ctx: { skip: (c: boolean, note?: string) => void }, target: Target): void {
  ctx.skip(!target.abilities.faultInjection, `target ${target.name} cannot inject faults`);
}

export function needsMotion(ctx: { skip: (c: boolean, note?: string) => void }, target: Target): void {
  ctx.skip(!target.abilities.motion, `motion is not allowed on target ${target.name} (run with --allow-motion on a rig)`);
}

/**
 * `test` for suites that latch faults and inject conditions: after each test the cell is released,
 * injected conditions are removed and latched fault bits are reset (a reset retires its own session),
 * so the next test starts from a clean cell.
 */
export const recoveringTest = test.extend<{ recover: void }>({
  recover: [
    async ({ cell, target, client }, use) => {
      await use();
      await cell.cleanup();
      if (target.abilities.faultInjection) await target.inject({ kind: 'clear' });
      const st = await waitStatus(client, (x) => x.core !== null && x.core.armed === 0n);
      if (st.core && st.core.execution_fault_reasons !== 0n) {
        const s = await cell.grant();
        await cell.fenced('reset_fault', s, { axis_mask: 0 });
        await cell.cleanup();
      }
    },
    { auto: true },
  ],
});
