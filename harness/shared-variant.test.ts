// A shared variant (harness/fixture.ts sharedVariant) leaves its cell released after each test: a test that
// ends without its own cleanup (it failed first) does not leave the next test of the block a cell owned by
// someone else (control_already_owned), a failure that would say nothing about the target; and a test that
// failed with a fault latched (its own reset never reached) leaves the next one a cell without it.

import { describe, expect, test } from 'vitest';
import { sharedVariant } from './fixture.ts';
import { readStatus } from './clients/status.ts';
import { readyStepped } from './clients/stepped.ts';

describe('a shared variant on the sim target', () => {
  const v = sharedVariant({ clock: 'stepped' });

  test('a test takes the grant, keeps renewing it and ends without releasing it', async () => {
    expect(v.cannot).toBeUndefined();
    const s = await v.cell.hold();
    expect(s.session).not.toBe('');
  });

  test('the next test finds the cell free: its acquire is granted', async () => {
    const r = await v.cell.acquire();
    expect({ status: r.status, label: r.label }).toEqual({ status: 200, label: undefined });
    await v.cell.cleanup();
  });

  // Expected to fail: it stands for a test whose check failed after it injected a fault, before it cleared
  // the condition and reset the fault.
  test.fails('a test injects a following error, the fault latches, and the test fails', async () => {
    await readyStepped(v.target, v.cell, v.target.client(), { axes: v.description.axes.length });
    await v.target.inject({ kind: 'following_error', axis: 0 });
    await v.target.step!(20);
    expect((await readStatus(v.target.client())).axes[0]!.fault).toBe(true);
    expect('the check that failed').toBe('');
  });

  test('the next test finds no fault latched and can make the cell ready', async () => {
    const st = await readStatus(v.target.client());
    expect(st.axes.filter((a) => a.fault).map((a) => a.id)).toEqual([]);
    await readyStepped(v.target, v.cell, v.target.client(), { axes: v.description.axes.length });
  });
});
