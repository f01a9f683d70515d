// Machine operations of the control service (document 1 part 4): enable, arm, home, halt, reset_fault,
// recovery_status, restore_anchor, io_arm, io_disarm. The service checks what it can see (masks,
// preconditions, anchors), submits one native command, and maps the native receipt to catalogue labels.

import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Authority, Grant, Reply } from './authority.ts';
import { CoreUnavailable, type CoreLink, type NativeReply } from './core-link.ts';
import { Refusal, refuse, type Binding, type Request } from './envelope.ts';
import type { CompiledMachine } from '../config/types.ts';
import type { CoreStatus, NativeOpName } from '../core/protocol.ts';
import { NATIVE_REASON } from '../core/reasons.ts';
import { nativeRefusal, type NativeFamily } from './native-labels.ts';
import { parseNonzeroU64 } from '../primitives.ts';

/** The service environment variable naming the anchor directory (document 1 part 4 home; name: profile). */
export const ANCHOR_DIR_ENV = 'CELL_ANCHOR_DIR';
export const RECOVERY_WAIT_MS = 1_000;
/** An anchor agrees when the absolute source moved no more than this many counts more than the incremental one. */
export const ANCHOR_TOLERANCE_COUNTS = 16;

export interface AnchorFile {
  schema: 'cell-hil.anchor.v1';
  pair_id: string;
  revision: string;
  configuration_sha256: string;
  axis: string;
  coordinate_identity: string;
  drive_identity: string;
  home_epoch: string;
  daemon_incarnation: string;
  absolute_counts: number;
  position_counts: number;
}

const ANCHOR_FIELDS: Record<keyof AnchorFile, 'string' | 'integer'> = {
  schema: 'string',
  pair_id: 'string',
  revision: 'string',
  configuration_sha256: 'string',
  axis: 'string',
  coordinate_identity: 'string',
  drive_identity: 'string',
  home_epoch: 'string',
  daemon_incarnation: 'string',
  absolute_counts: 'integer',
  position_counts: 'integer',
};

/** The ledger of the Home that produced each axis's current anchor (docs/profile.md "Anchors"). */
export const HOME_LEDGER = 'home-epochs.json';

/**
 * Validate a saved anchor completely: an object with exactly the anchor fields, each of its type, the
 * schema, a nonzero decimal Home epoch and 32-hex core incarnation, and safe-integer counts. Anything else is
 * a store problem (anchor_store_io), never a pass.
 */
function parseAnchor(text: string, axis: string): AnchorFile {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw refuse('anchor_store_io', `anchor for ${axis} is not readable JSON`);
  }
  const bad = (why: string) => refuse('anchor_store_io', `anchor for ${axis} is malformed: ${why}`);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('not an object');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!Object.hasOwn(ANCHOR_FIELDS, k)) throw bad(`unknown field ${k}`);
  for (const [k, kind] of Object.entries(ANCHOR_FIELDS)) {
    if (!Object.hasOwn(o, k)) throw bad(`missing ${k}`);
    const x = o[k];
    if (kind === 'string' ? typeof x !== 'string' : !Number.isSafeInteger(x)) throw bad(`${k} is not ${kind === 'string' ? 'a string' : 'an integer'}`);
  }
  const f = o as unknown as AnchorFile;
  if (f.schema !== 'cell-hil.anchor.v1') throw bad('unknown schema');
  if (parseNonzeroU64(f.home_epoch) === undefined) throw bad('home_epoch is not a nonzero uint64');
  if (parseNonzeroU64(f.revision) === undefined) throw bad('revision is not a nonzero uint64');
  if (!/^[0-9a-f]{32}$/.test(f.daemon_incarnation)) throw bad('daemon_incarnation is not 32 lowercase hex');
  return f;
}

/** The Home (core incarnation and epoch) that wrote an axis's anchor, as recorded in the ledger. */
function ledgerKey(f: Pick<AnchorFile, 'daemon_incarnation' | 'home_epoch'>): string {
  return `${f.daemon_incarnation}/${f.home_epoch}`;
}

export class MachineOps {
  /** A program is executing (set by the service: reset_fault and recovery_status refuse then, document 1 part 4). */
  programExecuting: () => boolean = () => false;
  private homeWaiters = new Map<bigint, (d: { ok: boolean; detail: string; reason: number }) => void>();

  constructor(
    private readonly core: CoreLink,
    private readonly authority: Authority,
    private readonly machine: CompiledMachine,
    private readonly binding: Required<Binding>,
    private readonly anchorDir: string | undefined,
    /** The service's stop after a failure (service.ts stopAfterFailure: the current grant only). */
    private readonly stopAfterFailure: (g: Grant) => Promise<void>,
  ) {
    core.on('home_done', (d: { sequence: bigint; ok: boolean; detail: string; reason: number }) => {
      this.homeWaiters.get(d.sequence)?.(d);
      this.homeWaiters.delete(d.sequence);
    });
    // Transport loss cancels Home at once (document 1 part 4 home: "stop, lease expiry or transport loss do").
    core.on('exit', (why: string) => {
      const waiters = [...this.homeWaiters.values()];
      this.homeWaiters.clear();
      for (const w of waiters) w({ ok: false, detail: `cancelled: core lost (${why})`, reason: NATIVE_REASON.cancelled });
    });
  }

  private get all(): number {
    return this.machine.axes.length >= 32 ? 0xffffffff : (1 << this.machine.axes.length) - 1;
  }

  private async native(op: NativeOpName, g: Grant, axisMask: number, timeoutMs = 1000): Promise<NativeReply> {
    try {
      return await this.core.command(op, g.generation, axisMask, {}, timeoutMs);
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('native_rejected', `no native receipt: ${e.message}`);
      throw e;
    }
  }

  /** A native refusal as a Refusal with the receipt in native_result. */
  private rejected(op: NativeFamily, n: NativeReply, data?: unknown): Refusal {
    return nativeRefusal(op, n, data);
  }

  /**
   * Re-check the fence after an await: the grant must still be the current one and not stopping when the
   * native command is handed to the core (document 1 part 2 "Fence": the fence holds at admission, not only
   * on arrival).
   */
  private still(op: string, g: Grant): Promise<void> | undefined {
    const check = () => {
      if (this.authority.fence(op, g.session, g.generation, this.authority.ownerOf(g.session)) !== g) throw refuse('control_session_stale', 'the grant changed while the request waited');
    };
    // The decision log may hold the decision to a recorded order (timing.ts DecisionLog.turn); a live run decides at once.
    const held = this.core.timing.log.turn('fence', op);
    if (!held) return void check();
    return held.then(check);
  }

  /** RecoveryStatus from the core, with `reason` following the faults that persist (part 2 RecoveryStatus). */
  private recoveryData(n: NativeReply): Record<string, unknown> | undefined {
    const r = (n.extra as { recovery?: Record<string, unknown> } | undefined)?.recovery;
    if (!r) return r;
    const faults = Array.isArray(r.faults) ? r.faults : [];
    return { ...r, reason: faults.length > 0 ? 'fault_persists' : '' };
  }

  private ok(op: string, n: NativeReply, data?: unknown): Reply {
    return { status: 200, body: { operation: op, sequence: n.result.Sequence, data } };
  }

  async simple(op: 'enable' | 'arm' | 'halt' | 'io_arm' | 'io_disarm', r: Request, g: Grant): Promise<Reply> {
    // io_arm grants permission for configured non-torch outputs (part 4 io_arm): torch outputs do not count.
    if ((op === 'io_arm' || op === 'io_disarm') && !this.machine.io?.outputs.some((o) => !o.torch)) {
      throw refuse('io_not_configured', 'this cell has no configured non-torch output');
    }
    const n = await this.native(op, g, op === 'enable' ? (r.axis_mask ?? 0) : 0);
    if (n.result.Result !== 0) throw this.rejected(op, n);
    return this.ok(op, n);
  }

  /** home: nonzero mask of configured native-home axes; waits up to 60 s; saves anchors; stops on failure. */
  async home(r: Request, g: Grant): Promise<Reply> {
    const mask = r.axis_mask ?? 0;
    if (mask === 0 || (mask & ~this.all) !== 0) throw refuse('invalid_axis_mask', 'axis_mask must be a nonzero mask of configured axes');
    const notNative = this.machine.axes.filter((a) => mask & (1 << a.index) && !a.native_home).map((a) => a.id);
    if (notNative.length) throw refuse('invalid_axis_mask', `axes without native Home: ${notNative.join(', ')}`);
    const n = await this.native('home', g, mask);
    if (n.result.Result !== 0) throw this.rejected('home', n);
    // The 60 s bound is the core's, in core time (sims/core/homing.ts HOME_WAIT_NS): the core always ends a
    // Home it accepted (attained, failed, timed out, cancelled) and the link cancels every waiter when the
    // core is lost. A wall-clock timer here would fail a Home the core finishes in time on a clock slower
    // than real time (--clock fast --speed 0.5) or a stepped one.
    const done = await new Promise<{ ok: boolean; detail: string; reason: number }>((resolve) => {
      this.homeWaiters.set(n.result.Sequence, resolve);
    });
    if (!done.ok) {
      // On failure the service issues a stop (document 1 part 4 home).
      await this.stopAfterFailure(g);
      throw new Refusal(409, 'native_rejected', `home failed: ${done.detail}`, undefined, {
        native_result: { ...n.result, Result: 1, Reason: done.reason },
      });
    }
    if (this.anchorDir) await this.saveAnchors(mask);
    return this.ok('home', n);
  }

  private async freshStatus(): Promise<CoreStatus> {
    const s = (await this.core.nextStatus(RECOVERY_WAIT_MS)) ?? undefined;
    if (!s) throw refuse('reset_requires_inhibited', 'no fresh core observation within 1 s');
    return s;
  }

  private inhibitedIdle(s: CoreStatus): void {
    if (s.armed) throw refuse('reset_requires_inhibited', 'the core is armed');
    if (s.homing_mask || s.commissioning_phase !== 'idle') throw refuse('reset_requires_inhibited', 'native Home or commissioning in progress');
  }

  async resetFault(r: Request, g: Grant): Promise<Reply> {
    const mask = r.axis_mask ?? 0;
    if ((mask & ~this.all) !== 0) throw refuse('invalid_axis_mask', 'axis_mask must select configured axes (0 means all)');
    if (this.programExecuting()) throw refuse('program_already_executing', 'a program is executing');
    this.inhibitedIdle(await this.freshStatus());
    const still = this.still('reset_fault', g);
    if (still) await still;
    // Submit first (the core admits it under the grant it holds), then retire: a submitted reset
    // retires the session even if the core refuses it (document 1 part 3).
    const submitted = this.core.command('reset_fault', g.generation, r.axis_mask ?? 0, {}, RECOVERY_WAIT_MS);
    this.authority.retire(g);
    let n: NativeReply;
    try {
      n = await submitted;
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('recovery_observation_unavailable', 'no correlated publication within 1 s');
      throw e;
    }
    const data = this.recoveryData(n);
    if (n.result.Result !== 0) {
      if (n.result.Reason !== NATIVE_REASON.fault_persists) throw this.rejected('reset_fault', n, data);
      throw new Refusal(409, 'fault_persists', n.detail ?? 'a fault condition persists', data, { native_result: n.result, sequence: n.result.Sequence });
    }
    return this.ok('reset_fault', n, data);
  }

  async recoveryStatus(g: Grant): Promise<Reply> {
    if (this.programExecuting()) throw refuse('program_already_executing', 'a program is executing');
    this.inhibitedIdle(await this.freshStatus());
    const still = this.still('recovery_status', g);
    if (still) await still;
    let n: NativeReply;
    try {
      n = await this.core.command('recovery_status', g.generation, 0, {}, RECOVERY_WAIT_MS);
    } catch (e) {
      if (e instanceof CoreUnavailable) throw refuse('recovery_observation_unavailable', 'no status within 1 s');
      throw e;
    }
    if (n.result.Result !== 0) throw this.rejected('recovery_status', n);
    return { status: 200, body: { operation: 'recovery_status', data: this.recoveryData(n) } };
  }

  // ---- anchors ----

  private identities(index: number): { coordinate: string; drive: string } {
    const a = this.machine.axes[index]!;
    return {
      coordinate: `${a.id}:${a.type}:${a.counts_per_unit}:${a.sign}:${a.coordinate_evidence_mode}`,
      drive: `slave:${a.slave_position}`,
    };
  }

  private async saveAnchors(mask: number): Promise<void> {
    const s = await this.core.nextStatus(RECOVERY_WAIT_MS);
    if (!s) throw refuse('anchor_source_invalid', 'no core observation to capture anchors from');
    // "anchor capture found the machine armed or enabled" (part 4 home): the whole machine, not only the
    // homed axes (Home itself leaves those disabled and the cell disarmed).
    if (s.armed || s.enable_mask) throw refuse('anchor_source_invalid', 'anchor capture found the machine armed or enabled');
    const dir = this.anchorDir!;
    try {
      await mkdir(dir, { recursive: true });
    } catch (e) {
      throw refuse('anchor_store_io', `anchor directory not writable: ${(e as Error).message}`);
    }
    const ledger = await this.readLedger(dir);
    for (const a of this.machine.axes) {
      if (!(mask & (1 << a.index))) continue;
      const ax = s.axes[a.index]!;
      if (!ax.absolute_valid) throw refuse('anchor_source_invalid', `axis ${a.id} has no valid absolute source`);
      const id = this.identities(a.index);
      const file: AnchorFile = {
        schema: 'cell-hil.anchor.v1',
        pair_id: this.binding.pair_id,
        revision: String(this.binding.revision),
        configuration_sha256: this.binding.configuration_sha256,
        axis: a.id,
        coordinate_identity: id.coordinate,
        drive_identity: id.drive,
        home_epoch: String(s.home_epoch),
        daemon_incarnation: this.core.incarnation,
        absolute_counts: ax.absolute_counts,
        position_counts: ax.position_counts,
      };
      const path = join(dir, `${a.id}.anchor.json`);
      try {
        await writeFile(`${path}.tmp`, JSON.stringify(file, null, 1) + '\n');
        await rename(`${path}.tmp`, path);
      } catch (e) {
        throw refuse('anchor_store_io', `cannot write ${path}: ${(e as Error).message}`);
      }
      ledger[a.id] = ledgerKey(file);
    }
    const path = join(dir, HOME_LEDGER);
    try {
      await writeFile(`${path}.tmp`, JSON.stringify(ledger, null, 1) + '\n');
      await rename(`${path}.tmp`, path);
    } catch (e) {
      throw refuse('anchor_store_io', `cannot write ${path}: ${(e as Error).message}`);
    }
  }

  /** The Home ledger of the anchor directory ({} when none was written yet). */
  private async readLedger(dir: string): Promise<Record<string, string>> {
    let text: string;
    try {
      text = await readFile(join(dir, HOME_LEDGER), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw refuse('anchor_store_io', `Home ledger unreadable: ${(e as NodeJS.ErrnoException).code}`);
    }
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      throw refuse('anchor_store_io', 'Home ledger is not readable JSON');
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) {
      throw refuse('anchor_store_io', 'Home ledger is malformed');
    }
    return v as Record<string, string>;
  }

  async restoreAnchor(r: Request, g: Grant): Promise<Reply> {
    const mask = r.axis_mask ?? 0;
    if (mask === 0 || (mask & ~this.all) !== 0) throw refuse('invalid_axis_mask', 'axis_mask must be a nonzero mask of configured axes');
    const s = await this.core.nextStatus(RECOVERY_WAIT_MS);
    if (!s) throw refuse('recovery_observation_unavailable', 'no core observation within 1 s');
    const still = this.still('restore_anchor', g);
    if (still) await still;
    if (s.armed || s.enable_mask || s.homing_mask || s.commissioning_phase !== 'idle') throw refuse('mode_conflict', 'the machine must be disarmed, disabled and not commissioning');
    if (!this.anchorDir) throw refuse('anchor_store_io', `no anchor directory configured (${ANCHOR_DIR_ENV})`);
    const ledger = await this.readLedger(this.anchorDir);
    for (const a of this.machine.axes) {
      if (!(mask & (1 << a.index))) continue;
      const path = join(this.anchorDir, `${a.id}.anchor.json`);
      let text: string;
      try {
        text = await readFile(path, 'utf8');
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') throw refuse('anchor_missing', `no anchor for axis ${a.id}`);
        throw refuse('anchor_store_io', `anchor directory unreadable: ${code}`);
      }
      const f = parseAnchor(text, a.id);
      const id = this.identities(a.index);
      if (
        f.axis !== a.id ||
        f.pair_id !== this.binding.pair_id ||
        f.revision !== String(this.binding.revision) ||
        f.configuration_sha256 !== this.binding.configuration_sha256 ||
        f.coordinate_identity !== id.coordinate ||
        f.drive_identity !== id.drive
      ) {
        throw refuse('anchor_identity_mismatch', `anchor for ${a.id} belongs to another pair, revision, configuration, axis or drive`);
      }
      // Home epoch (part 4 restore_anchor): the anchor must come from the Home the ledger records for this
      // axis; an anchor of an earlier or foreign Home is another identity.
      if (ledger[a.id] !== ledgerKey(f)) throw refuse('anchor_identity_mismatch', `anchor for ${a.id} is not from the Home recorded for it (epoch ${f.home_epoch})`);
      const ax = s.axes[a.index]!;
      if (!ax.absolute_valid) throw refuse('anchor_source_invalid', `axis ${a.id} has no valid absolute source`);
      // The absolute encoder must have moved exactly as far as the incremental counter since capture.
      const drift = ax.absolute_counts - f.absolute_counts - (ax.position_counts - f.position_counts);
      if (Math.abs(drift) > ANCHOR_TOLERANCE_COUNTS) throw refuse('anchor_disagrees', `axis ${a.id} absolute source disagrees by ${drift} counts`);
    }
    const again = this.still('restore_anchor', g);
    if (again) await again;
    const n = await this.native('restore_anchor', g, mask);
    if (n.result.Result !== 0) throw this.rejected('restore_anchor', n);
    return this.ok('restore_anchor', n, this.recoveryData(n));
  }
}
