// arm right after enable (docs/profile.md "Machine operations", arm): a client may send enable and arm
// back to back; the core waits a bounded time for the enabled axes to reach operation enabled instead of
// racing the client. Both outcomes are shown on stacks with the stepped clock, where no cycle runs unless
// the test asks, so "right after" is exact and nothing depends on the machine's load.

import { Cell } from '../../harness/clients/cell.ts';
import { readStatus } from '../../harness/clients/status.ts';
import { describe, expect, profile, test, type VariantOf } from '../../harness/fixture.ts';
import type { Target } from '../../harness/targets/types.ts';
import type { BindingInput } from '../../harness/clients/control.ts';

async function steppedStack(variant: VariantOf, settleMs: number): Promise<{ target: Target; cell: Cell; axes: number; cycleNs: bigint }> {
  const target = await variant({ clock: 'stepped', armSettleMs: settleMs });
  const client = target.client();
  const d = (await client.describe()).reply.data as unknown as { binding: BindingInput; axes: unknown[]; clock?: string; cycle_ns: bigint };
  expect(d.clock).toBe('stepped');
  // The core's time advances by the cell's own cycle (Describe cycle_ns), whatever the default fixture's is.
  return { target, cell: new Cell(client, d.binding), axes: d.axes.length, cycleNs: BigInt(d.cycle_ns) };
}

describe('arm right after enable', () => {
  test('arm sent right after enable answers 200 once the drives reach operation enabled', profile('profile:machine.arm_settle'), async ({ variant }) => {
    const { target, cell, axes, cycleNs } = await steppedStack(variant, 500);
    const s = await cell.hold({ requested_lease_ms: 10_000 });
    const all = (1 << axes) - 1;
    expect((await cell.fenced('enable', s, { axis_mask: all })).status).toBe(200);
    // No cycle has run since enable: every drive is still switched off.
    expect(Number((await readStatus(cell.client)).core!.axis_enable_mask)).toBe(0);
    const arm = cell.fenced('arm', s);
    const t0 = await target.step!(1);
    let now = t0;
    for (let k = 0; k < 10; k++) now = await target.step!(1); // CiA 402 needs three transitions
    const r = await arm;
    expect(r.status, r.reply.error).toBe(200);
    expect(r.reply.sequence).toBeGreaterThan(0n);
    expect((await readStatus(cell.client)).core!.armed).toBe(1n);
    expect(now - t0).toBe(10n * cycleNs);
    await cell.cleanup();
  });

  test('with a settle bound of 0 the same arm is refused not_ready on the next cycle', profile('profile:machine.arm_settle'), async ({ variant }) => {
    const { target, cell, axes } = await steppedStack(variant, 0);
    const s = await cell.hold({ requested_lease_ms: 10_000 });
    expect((await cell.fenced('enable', s, { axis_mask: (1 << axes) - 1 })).status).toBe(200);
    const arm = cell.fenced('arm', s);
    await target.step!(1);
    const r = await arm;
    expect(r.status).toBe(409);
    expect(r.label).toBe('not_ready');
    expect(r.reply.native_result).toMatchObject({ Result: 1, Reason: 2 });
    expect((await readStatus(cell.client)).core!.armed).toBe(0n);
    await cell.cleanup();
  });
});
