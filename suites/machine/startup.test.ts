// Machine behaviour that depends on how the cell was brought up: a drive whose PDO mapping differs,
// a cell without cell I/O, anchors from another pair, an anchor store that cannot be written. Each needs
// a stack started with particular options, which only the sim target can do; other targets skip.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { Cell } from '../../harness/clients/cell.ts';
import { ControlClient } from '../../harness/clients/control.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { startStack, type StackProcess } from '../../harness/targets/sim.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';

const onSim = (process.env.HIL_TARGET ?? 'sim') === 'sim';
const SKIP = 'needs the sim target: only it can start a stack with chosen bring-up options';
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const opened: Array<{ stack: StackProcess; client: ControlClient }> = [];
const scratch: string[] = [];
afterAll(async () => {
  for (const o of opened.splice(0)) {
    await o.client.close();
    await o.stack.stop();
  }
  for (const d of scratch.splice(0)) await rm(d, { recursive: true, force: true });
});

async function stack(args: string[], env: Record<string, string> = {}): Promise<{ client: ControlClient; cell: Cell }> {
  const s = await startStack(args, 30_000, env);
  const client = new ControlClient(s.ready.control);
  opened.push({ stack: s, client });
  const d = (await client.describe()).reply.data as { binding: { pair_id: string; revision: bigint; configuration_sha256: string } };
  return { client, cell: new Cell(client, d.binding) };
}

describe('bring-up', () => {
  test('a drive whose PDO mapping differs latches bit 11 restart_required; enable answers pdo_mapping_mismatch (native reason 7); no reset clears it', covers('reason:pdo_mapping_mismatch', 'rule:fault_bits.bit11_restart_required'), async ({ skip }) => {
    skip(!onSim, SKIP);
    const { client, cell } = await stack(['--sim-fault', 'pdo_mapping_mismatch:3']);
    const st = await waitStatus(client, (x) => x.core !== null);
    expect(Number(st.core!.execution_fault_reasons) & 2048).toBe(2048);
    const s = await cell.grant();
    const r = await cell.fenced('enable', s, { axis_mask: 1 << 3 });
    expect(r.status).toBe(409);
    expect(r.label).toBe('pdo_mapping_mismatch');
    expect(r.reply.native_result?.Reason).toBe(7);
    const reset = await cell.fenced('reset_fault', s, { axis_mask: 0 });
    expect(reset.label).toBe('fault_persists');
    const f = (reset.reply.data as { faults: Array<{ bit: bigint; name: string; recovery: string; axis_mask: bigint }> }).faults.find((x) => x.bit === 11n);
    expect(f).toMatchObject({ name: 'restart_required', recovery: 'restart', axis_mask: 8n });
    await cell.cleanup();
  });

  test('cell I/O operations on a cell without cell I/O answer io_not_configured', covers('reason:io_not_configured'), async ({ skip }) => {
    skip(!onSim, SKIP);
    const { client, cell } = await stack(['--machine', join(ROOT, 'fixtures', 'machines', 'bench-two-axis.json')]);
    expect(((await client.describe()).reply.data as { io: unknown }).io).toBeNull();
    const s = await cell.grant();
    for (const op of ['io_arm', 'io_disarm']) {
      const r = await cell.fenced(op, s);
      expect(r.status, op).toBe(409);
      expect(r.label, op).toBe('io_not_configured');
    }
    await cell.cleanup();
  });
});

describe('socket flag', () => {
  test('--socket puts the control socket elsewhere; public/control.sock in the socket directory still reaches it', covers('rule:transport.socket_flag_default'), async ({ skip }) => {
    skip(!onSim, SKIP);
    const dir = await mkdtemp(join(tmpdir(), 'hil-socket-'));
    scratch.push(dir);
    const custom = join(dir, 'cell-a.sock');
    const s = await startStack(['--socket', custom]);
    const viaFlag = new ControlClient(custom);
    const viaLink = new ControlClient(join(s.dir, 'public', 'control.sock'));
    opened.push({ stack: s, client: viaFlag });
    try {
      expect(s.ready.control).toBe(custom);
      expect((await viaFlag.describe()).status).toBe(200);
      expect((await viaLink.describe()).status).toBe(200);
    } finally {
      await viaLink.close();
    }
  });
});

describe('anchor store', () => {
  test('anchors saved by another pair answer anchor_identity_mismatch', covers('reason:anchor_identity_mismatch'), async ({ skip }) => {
    skip(!onSim, SKIP);
    const dir = await mkdtemp(join(tmpdir(), 'hil-anchors-'));
    scratch.push(dir);
    const env = { CELL_ANCHOR_DIR: dir };
    const a = await stack(['--pair-id', 'cell-a'], env);
    const sa = await a.cell.hold();
    expect((await a.cell.fenced('home', sa, { axis_mask: 1 })).status).toBe(200);
    await a.cell.cleanup();
    const b = await stack(['--pair-id', 'cell-b'], env);
    const sb = await b.cell.grant();
    const r = await b.cell.fenced('restore_anchor', sb, { axis_mask: 1 });
    expect(r.status).toBe(409);
    expect(r.label).toBe('anchor_identity_mismatch');
    expect(Number((await readStatus(b.client)).core!.home_valid_mask) & 1).toBe(0);
    await b.cell.cleanup();
  });

  test('an anchor directory that cannot be written or read answers anchor_store_io', covers('reason:anchor_store_io'), async ({ skip }) => {
    skip(!onSim, SKIP);
    const dir = await mkdtemp(join(tmpdir(), 'hil-anchors-'));
    scratch.push(dir);
    // A path below a regular file can be neither created nor read, even by root.
    await writeFile(join(dir, 'not-a-directory'), 'x');
    const { cell } = await stack([], { CELL_ANCHOR_DIR: join(dir, 'not-a-directory', 'anchors') });
    const s = await cell.hold();
    const home = await cell.fenced('home', s, { axis_mask: 1 });
    expect(home.status).toBe(409);
    expect(home.label).toBe('anchor_store_io');
    const restore = await cell.fenced('restore_anchor', s, { axis_mask: 1 });
    expect(restore.status).toBe(409);
    expect(restore.label).toBe('anchor_store_io');
    await cell.cleanup();
  });
});
