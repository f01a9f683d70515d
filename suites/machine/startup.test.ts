// Machine behaviour that depends on how the cell was brought up: a drive whose PDO mapping differs,
// a cell without cell I/O, anchors from another pair, an anchor store that cannot be written. Each needs
// a stack started with particular options: each test asks the target for a variant; a target that
// cannot start one skips with its reason.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { Cell } from '../../harness/clients/cell.ts';
import { ControlClient } from '../../harness/clients/control.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { machineOf } from '../../harness/machine.ts';
import { covers, describe, expect, test, type VariantOf } from '../../harness/fixture.ts';
import type { VariantOptions } from '../../harness/targets/index.ts';

const scratch: string[] = [];
afterAll(async () => {
  for (const d of scratch.splice(0)) await rm(d, { recursive: true, force: true });
});

async function stack(variant: VariantOf, options: VariantOptions): Promise<{ client: ControlClient; cell: Cell; home: number | undefined }> {
  const client = (await variant(options)).client();
  const d = (await client.describe()).reply.data as { binding: { pair_id: string; revision: bigint; configuration_sha256: string } };
  // The first natively homeable axis of the cell (its stack runs the run's machine configuration).
  return { client, cell: new Cell(client, d.binding), home: machineOf(d).homeable[0]?.bit };
}
const NO_HOME = 'the cell has no axis with native Home (Describe native_home)';

describe('bring-up', () => {
  test('a drive whose PDO mapping differs latches bit 11 restart_required; enable answers pdo_mapping_mismatch (native reason 7); no reset clears it', covers('reason:pdo_mapping_mismatch', 'rule:fault_bits.bit11_restart_required'), async ({ variant }) => {
    // The first axis: every cell has one (the default fixture's J4 is not on a one- or two-axis cell).
    const { client, cell } = await stack(variant, { bringUpFaults: [{ kind: 'pdo_mapping_mismatch', axis: 0 }] });
    const st = await waitStatus(client, (x) => x.core !== null);
    expect(Number(st.core!.execution_fault_reasons) & 2048).toBe(2048);
    const s = await cell.hold();
    const r = await cell.fenced('enable', s, { axis_mask: 1 });
    expect(r.status).toBe(409);
    expect(r.label).toBe('pdo_mapping_mismatch');
    expect(r.reply.native_result?.Reason).toBe(7);
    const reset = await cell.fenced('reset_fault', s, { axis_mask: 0 });
    expect(reset.label).toBe('fault_persists');
    const f = (reset.reply.data as { faults: Array<{ bit: bigint; name: string; recovery: string; axis_mask: bigint }> }).faults.find((x) => x.bit === 11n);
    expect(f).toMatchObject({ name: 'restart_required', recovery: 'restart', axis_mask: 1n });
    await cell.cleanup();
  });

  test('cell I/O operations on a cell without cell I/O answer io_not_configured', covers('reason:io_not_configured'), async ({ variant }) => {
    const { client, cell } = await stack(variant, { machine: 'bench-two-axis' });
    expect(((await client.describe()).reply.data as { io: unknown }).io).toBeNull();
    const s = await cell.hold();
    for (const op of ['io_arm', 'io_disarm']) {
      const r = await cell.fenced(op, s);
      expect(r.status, op).toBe(409);
      expect(r.label, op).toBe('io_not_configured');
    }
    await cell.cleanup();
  });
});

describe('socket flag', () => {
  test('--socket puts the control socket elsewhere; public/control.sock in the socket directory still reaches it', covers('rule:transport.socket_flag_default'), async ({ variant }) => {
    const dir = await mkdtemp(join(tmpdir(), 'hil-socket-'));
    scratch.push(dir);
    const custom = join(dir, 'cell-a.sock');
    const s = await variant({ controlSocket: custom });
    const viaFlag = new ControlClient(custom);
    const viaLink = new ControlClient(s.publicAddress!);
    try {
      expect(s.address).toBe(custom);
      expect(s.publicAddress).toMatch(/\/public\/control\.sock$/);
      expect((await viaFlag.describe()).status).toBe(200);
      expect((await viaLink.describe()).status).toBe(200);
    } finally {
      await viaFlag.close();
      await viaLink.close();
    }
  });
});

describe('anchor store', () => {
  test('anchors saved by another pair answer anchor_identity_mismatch', covers('reason:anchor_identity_mismatch'), async ({ variant, skip }) => {
    const dir = await mkdtemp(join(tmpdir(), 'hil-anchors-'));
    scratch.push(dir);
    const anchorStore = { kind: 'directory', dir } as const;
    const a = await stack(variant, { pairId: 'cell-a', anchorStore });
    const bit = a.home;
    skip(bit === undefined, NO_HOME);
    const sa = await a.cell.hold();
    expect((await a.cell.fenced('home', sa, { axis_mask: bit })).status).toBe(200);
    await a.cell.cleanup();
    const b = await stack(variant, { pairId: 'cell-b', anchorStore });
    const sb = await b.cell.hold();
    const r = await b.cell.fenced('restore_anchor', sb, { axis_mask: bit });
    expect(r.status).toBe(409);
    expect(r.label).toBe('anchor_identity_mismatch');
    expect(Number((await readStatus(b.client)).core!.home_valid_mask) & bit!).toBe(0);
    await b.cell.cleanup();
  });

  test('an anchor directory that cannot be written or read answers anchor_store_io', covers('reason:anchor_store_io'), async ({ variant, skip }) => {
    const { cell, home: bit } = await stack(variant, { anchorStore: { kind: 'unusable' } });
    skip(bit === undefined, NO_HOME);
    const s = await cell.hold();
    const home = await cell.fenced('home', s, { axis_mask: bit });
    expect(home.status).toBe(409);
    expect(home.label).toBe('anchor_store_io');
    const restore = await cell.fenced('restore_anchor', s, { axis_mask: bit });
    expect(restore.status).toBe(409);
    expect(restore.label).toBe('anchor_store_io');
    await cell.cleanup();
  });
});
