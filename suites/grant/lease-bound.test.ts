// The absolute lease bound (document 1 part 2 Grant.lease_ms: "an absolute 10000 ms bound"; Request
// requested_lease_ms "whole ms, 1..10000"; part 8 requested_lease_ms 1..10000). On the default cells the
// ceiling (500 ms LAN, 3000 ms internet) hides the bound: min(request, ceiling) is the ceiling long before
// 10000. Here the cell is configured with the largest ceiling document 3 allows (control.max_grant_lease_ns
// 10000000000, part 3 machine configuration), so the only thing between a request and its lease is the
// absolute bound itself: 10000 ms is granted as 10000 ms, one more is refused.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll } from 'vitest';
import { limit, reason } from '../../harness/catalogue/index.ts';
import type { BindingInput } from '../../harness/clients/control.ts';
import { checkGrant } from '../../harness/oracle/reply.ts';
import { covers, describe, expect, scratchDir, sharedVariant, test } from '../../harness/fixture.ts';
import { edited, readMachine, writeJson } from '../config/toolkit.ts';

const BOUND_MS = limit('absolute_lease_bound_ms').max as bigint;
const CEILING_NS = limit('machine_max_grant_lease_ns').max as bigint;
const REFUSAL = reason('invalid_requested_lease').label;
const MS = 1_000_000n;

const dir = scratchDir('hil-lease-bound');
const machine = join(dir, 'nine-axis-10s-lease.json');
beforeAll(() => writeFile(machine, writeJson(edited(readMachine('nine-axis'), { 'control.max_grant_lease_ns': CEILING_NS }), 2)));

describe('absolute lease bound on a cell whose ceiling is the largest configurable', () => {
  const v = sharedVariant<{ binding: BindingInput; max_grant_lease_ms: bigint }>({ machine });

  test(
    `requested_lease_ms ${BOUND_MS} is granted in full; ${BOUND_MS + 1n} is refused with ${REFUSAL} and changes nothing`,
    covers('limit:absolute_lease_bound_ms', 'reason:invalid_requested_lease', 'field:Grant.lease_ms'),
    async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot);
      // The configured ceiling is the bound itself, so min(request, ceiling) cannot hide it.
      expect(BigInt(v.description.max_grant_lease_ms) * MS).toBe(CEILING_NS);
      expect(CEILING_NS).toBe(BOUND_MS * MS);
      const client = v.target.client();

      // One above the bound: refused, no grant appears, the cell can still be acquired.
      const over = await v.cell.acquire({ requested_lease_ms: BOUND_MS + 1n });
      expect({ status: over.status, label: over.label }).toEqual({ status: 409, label: REFUSAL });
      const idle = (await client.status()).reply.data as { grant: { active: boolean } };
      expect(idle.grant.active).toBe(false);

      // The bound itself: the whole 10000 ms, and a deadline 10 s after the acquisition on the cell's clock.
      const t0 = ((await client.status()).reply.data as { now_host_ns: bigint }).now_host_ns;
      const r = await v.cell.acquire({ requested_lease_ms: BOUND_MS });
      expect(r.status, r.reply.error).toBe(200);
      const g = checkGrant(r.reply.data);
      expect(g.lease_ms).toBe(Number(BOUND_MS));
      const t1 = ((await client.status()).reply.data as { now_host_ns: bigint }).now_host_ns;
      expect(g.deadline_host_ns >= t0 + BOUND_MS * MS).toBe(true);
      expect(g.deadline_host_ns <= t1 + BOUND_MS * MS).toBe(true);
      // renew keeps it
      const renewed = await v.cell.fenced('renew', g);
      expect(renewed.status, renewed.reply.error).toBe(200);
      expect(checkGrant(renewed.reply.data).lease_ms).toBe(Number(BOUND_MS));
      expect((await v.cell.fenced('release', g)).status).toBe(200);

      // Far above the bound is refused the same way (not wrapped, not clamped).
      for (const bad of [BOUND_MS * 2n, 1n << 32n]) {
        const x = await v.cell.acquire({ requested_lease_ms: bad });
        expect({ bad, status: x.status, label: x.label }).toEqual({ bad, status: 409, label: REFUSAL });
      }
    },
  );
});
