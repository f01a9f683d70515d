// A shared variant (harness/fixture.ts sharedVariant) leaves its cell released after each test: a test that
// ends without its own cleanup (it failed first) does not leave the next test of the block a cell owned by
// someone else (control_already_owned), a failure that would say nothing about the target.

import { describe, expect, test } from 'vitest';
import { sharedVariant } from './fixture.ts';

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
});
