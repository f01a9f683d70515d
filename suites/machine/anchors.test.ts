// Saved anchors are evidence, validated whole (document 1 part 4 restore_anchor: "the saved anchor's pair,
// revision, coordinate identity, drive identity and absolute source must match current evidence";
// anchor_identity_mismatch names "other pair, revision, configuration, drive identity or Home epoch";
// anchor_store_io an unreadable store). A corrupt or foreign anchor must never restore Home evidence.
// The anchor files are the reference stack's (docs/profile.md "Anchors"); this file starts its own stack
// with an anchor directory it owns, homes one axis, restarts the core to drop the evidence, then edits
// the saved file before each restore.

import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { Cell } from '../../harness/clients/cell.ts';
import type { BindingInput } from '../../harness/clients/control.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { variantsFromEnv, type Target, type VariantOptions } from '../../harness/targets/index.ts';
import { covers, describe, expect, test } from '../../harness/fixture.ts';
const AXIS = 3; // J4 of the nine-axis fixture
const BIT = 1 << AXIS;

describe('restore_anchor refuses corrupt and foreign anchors', () => {
  let stack: Target | undefined;
  /** Why this target cannot give the file a stack whose anchor store it owns (then every test skips). */
  let cannot: string | undefined;
  let dir: string;
  let cell: Cell;
  let file: string;
  let saved: string;

  const restartCore = async () => {
    await stack!.restartCore();
    await waitStatus(cell.client, (x) => x.core !== null && (Number(x.core.home_valid_mask) & BIT) === 0);
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hil-anchors-'));
    const options: VariantOptions = { anchorStore: { kind: 'directory', dir } };
    const variants = variantsFromEnv();
    cannot = variants.cannotProvide(options);
    if (cannot !== undefined) return;
    stack = await variants.open(options);
    const client = stack.client();
    const d = (await client.describe()).reply.data as unknown as { binding: BindingInput; axes: Array<{ id: string }> };
    cell = new Cell(client, d.binding);
    const s = await cell.hold();
    const home = await cell.fenced('home', s, { axis_mask: BIT });
    expect(home.status, home.reply.error).toBe(200);
    await cell.cleanup();
    file = join(dir, `${d.axes[AXIS]!.id}.anchor.json`);
    saved = await readFile(file, 'utf8');
  });
  afterAll(async () => {
    await cell?.cleanup();
    await stack?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function restoreWith(text: string): Promise<{ status: number; label?: string; homed: boolean }> {
    await restartCore();
    await writeFile(file, text);
    const s = await cell.hold();
    const r = await cell.fenced('restore_anchor', s, { axis_mask: BIT });
    await cell.cleanup();
    const st = await readStatus(cell.client);
    return { status: r.status, label: r.label, homed: (Number(st.core!.home_valid_mask) & BIT) !== 0 };
  }

  const edit = (f: (o: Record<string, unknown>) => void) => {
    const o = JSON.parse(saved) as Record<string, unknown>;
    f(o);
    return JSON.stringify(o);
  };

  const cases: Array<[string, () => string, string]> = [
    ['both counts removed and a foreign Home epoch', () => edit((o) => { delete o.absolute_counts; delete o.position_counts; o.home_epoch = '99'; }), 'anchor_store_io'],
    ['the file is JSON null', () => 'null', 'anchor_store_io'],
    ['the file is an array', () => '[]', 'anchor_store_io'],
    ['absolute_counts is a string', () => edit((o) => { o.absolute_counts = String(o.absolute_counts); }), 'anchor_store_io'],
    ['position_counts is missing', () => edit((o) => { delete o.position_counts; }), 'anchor_store_io'],
    ['an unknown field is present', () => edit((o) => { o.extra = 1; }), 'anchor_store_io'],
    ['the pair id differs', () => edit((o) => { o.pair_id = 'another-pair'; }), 'anchor_identity_mismatch'],
    ['the Home epoch differs (another Home)', () => edit((o) => { o.home_epoch = String(BigInt(o.home_epoch as string) + 1n); }), 'anchor_identity_mismatch'],
    ['the drive identity differs', () => edit((o) => { o.drive_identity = 'slave:99'; }), 'anchor_identity_mismatch'],
  ];

  for (const [what, text, label] of cases) {
    test(`an anchor where ${what} answers ${label} and restores nothing`, covers(`reason:${label}`, 'rule:op.restore_anchor.result'), async ({ skip }) => {
      skip(cannot !== undefined, cannot ?? '');
      const r = await restoreWith(text());
      expect(r).toEqual({ status: 409, label, homed: false });
    });
  }

  test('the untouched anchor restores Home evidence (the same path can succeed)', covers('rule:op.restore_anchor.result'), async ({ skip }) => {
    skip(cannot !== undefined, cannot ?? '');
    const r = await restoreWith(saved);
    expect(r).toEqual({ status: 200, label: undefined, homed: true });
  });
});
