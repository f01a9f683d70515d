// Saved anchors are evidence, validated whole (document 1 part 4 restore_anchor: "the saved anchor's pair,
// revision, coordinate identity, drive identity and absolute source must match current evidence";
// anchor_identity_mismatch names "other pair, revision, configuration, drive identity or Home epoch";
// anchor_store_io an unreadable store). A corrupt or foreign anchor must never restore Home evidence.
// The anchor files are the reference stack's (docs/profile.md "Anchors"); this file starts its own stack
// with an anchor directory it owns, homes one axis, restarts the core to drop the evidence, then edits
// the saved file before each restore.

import { readdirSync, rmSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, beforeEach } from 'vitest';
import type { BindingInput } from '../../harness/clients/control.ts';
import { readStatus, waitStatus } from '../../harness/clients/status.ts';
import { covers, describe, expect, hostJudged, perTestStacks, scratchDir, sharedVariant, test } from '../../harness/fixture.ts';
import { machineOf } from '../../harness/machine.ts';

/** The axis homed here: the fourth natively homeable axis of the cell (J4 of the default), or its last. */
let AXIS = 3;
let BIT = 1 << AXIS;
/** The pair revision of this file's stack. */
const REVISION = 5n;
/** Why the cell cannot run this file (no natively homeable axis), once its stack is up. */
let noHome: string | undefined;

/** Remove what a directory holds, keeping the directory. */
function emptyDir(dir: string): void {
  for (const f of readdirSync(dir)) rmSync(join(dir, f), { recursive: true, force: true });
}

describe('restore_anchor refuses corrupt and foreign anchors', () => {
  // The file's stack owns this anchor store. On recorded and replayed runs every test has a stack of its own
  // (harness/targets/pertest.ts), and each starts from an empty store: this hook is registered before the
  // shared variant's, so it runs first.
  const dir = scratchDir('hil-anchors');
  const perTest = perTestStacks();
  if (perTest) beforeEach(() => emptyDir(dir));
  // A pair revision other than the default 1, so that an anchor one revision below it can be written.
  const v = sharedVariant<{ binding: BindingInput; axes: Array<{ id: string }> }>({ anchorStore: { kind: 'directory', dir }, pairRevision: REVISION });
  let file: string;
  let saved: string;

  /**
   * Home the axis once on the stack (saving its anchor) and keep the saved file's text. A set-up step: a
   * grant its keeper lost to the host's lateness makes it ERROR, not a FAIL of every test here.
   */
  const homed = () => hostJudged(async () => {
    if (v.cannot !== undefined) return;
    const h = machineOf(v.description).homeable;
    noHome = h.length === 0 ? 'the cell has no axis with native Home (Describe native_home) to save an anchor of' : undefined;
    if (noHome) return;
    AXIS = h[Math.min(3, h.length - 1)]!.index;
    BIT = 2 ** AXIS;
    const s = await v.cell.hold();
    const home = await v.cell.fenced('home', s, { axis_mask: BIT });
    expect(home.status, home.reply.error).toBe(200);
    await v.cell.cleanup();
    file = join(dir, `${v.description.axes[AXIS]!.id}.anchor.json`);
    saved = await readFile(file, 'utf8');
  });
  if (perTest) beforeEach(homed);
  else beforeAll(homed);

  const restartCore = async () => {
    await v.target.restartCore();
    await waitStatus(v.cell.client, (x) => x.core !== null && (Number(x.core.home_valid_mask) & BIT) === 0);
  };

  async function restoreWith(text: string): Promise<{ status: number; label?: string; homed: boolean }> {
    await restartCore();
    await writeFile(file, text);
    const s = await v.cell.hold();
    const r = await v.cell.fenced('restore_anchor', s, { axis_mask: BIT });
    await v.cell.cleanup();
    const st = await readStatus(v.cell.client);
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
    // The revision on both sides of the stack's own (document 1 part 4 restore_anchor: the pair's revision
    // must match); the untouched anchor below, at the same revision, restores.
    ['the pair revision is one below the stack\'s', () => edit((o) => { o.revision = String(REVISION - 1n); }), 'anchor_identity_mismatch'],
    ['the pair revision is one above the stack\'s', () => edit((o) => { o.revision = String(REVISION + 1n); }), 'anchor_identity_mismatch'],
  ];

  for (const [what, text, label] of cases) {
    test(`an anchor where ${what} answers ${label} and restores nothing`, covers(`reason:${label}`, 'rule:op.restore_anchor.result'), async ({ skip }) => {
      skip(v.cannot !== undefined, v.cannot ?? '');
      skip(noHome !== undefined, noHome);
      const r = await restoreWith(text());
      expect(r).toEqual({ status: 409, label, homed: false });
    });
  }

  test('the untouched anchor restores Home evidence (the same path can succeed)', covers('rule:op.restore_anchor.result'), async ({ skip }) => {
    skip(v.cannot !== undefined, v.cannot ?? '');
    skip(noHome !== undefined, noHome);
    expect((JSON.parse(saved) as { revision: string }).revision, 'the anchor was saved under the stack\'s pair revision').toBe(String(REVISION));
    const r = await restoreWith(saved);
    expect(r).toEqual({ status: 200, label: undefined, homed: true });
  });
});
