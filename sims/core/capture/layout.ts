// The core's telemetry capture ring: document 1 part 2 "Telemetry binary records" (CycleCaptureRecordV2,
// CycleCaptureAxisV2, TelemetryBatchHeaderV1, little-endian) and part 4 "Observation endpoints" (cursor
// rules), with the record layout digest of docs/profile.md "Harness oracle / Telemetry".
//
// The ring lives in one SharedArrayBuffer: the core's worker writes one record per cycle through a
// reusable RecordWriter (no allocation per cycle), the service thread reads batches through a
// CaptureReader built from the same buffer. Consistency is a seqlock on the ring header:
//
//   writer  beginRecord: G := G + 1 (odd)  -> zero the slot, fill fields
//           commit:      NEWEST := seq; G := G + 1 (even); notify a waiting reader
//   reader  sample:      g1 := G (must be even), NEWEST, g2 := G (must equal g1)  -- else the header is torn
//           copy the slots, then g3 := G: every record begun since g1 may have overwritten the oldest
//           slots; copied records that were (possibly) overwritten are trimmed from the front of the batch
//           and counted in `dropped` (they are history lost after the cursor, which is what dropped means).
//
// A torn header sample is retried (waiting briefly for the writer's commit) up to 16 times, then the read
// answers 'busy' (document 1 part 7: telemetry_busy, "ring header torn after 16 samples").
//
// A slot holds only the record's first 272 + axisCount * 320 bytes (9 axes: 3152 of 5392); the reader
// copies each into a zeroed 5392-byte record, so unused axis slots are zero by construction.
//
// Sequences are 1, 2, 3 ... in commit order, contiguous, owned by the ring (the core's incarnation).
// The writer keeps them as JS numbers (exact up to 2^53: 285 000 years at 1 kHz); the reader's API uses
// bigint like the batch header.

//
// This module: the documented sizes, the field tables, the record layout digest, ring capacity and the
// batch header codec. ring.ts is the shared buffer and its writer side, writer.ts fills one record,
// reader.ts serves batches to the service.

import { createHash } from 'node:crypto';

export const HEX32 = /^[0-9a-f]{32}$/;
export const HEX64 = /^[0-9a-f]{64}$/;
export const TWO32 = 2 ** 32;
/** 2^64 - 1 (the reference system's one definition: sims/json.ts). */
import { U64_MAX } from '../../primitives.ts';

// ---------------------------------------------------------------------------------------------------
// Documented sizes and constants.

export const RECORD_BYTES = 5392;
export const AXIS_BYTES = 320;
export const HEADER_BYTES = 312;
/** Offset of `ax` (16 CycleCaptureAxisV2 slots) in CycleCaptureRecordV2. */
export const AXIS_ARRAY_OFFSET = 272;
export const AXIS_SLOTS = 16;
export const BATCH_MAGIC = 0x31425452;
export const BATCH_VERSION = 1;
/** At most 4096 records per batch (document 1 part 2 / part 8). */
export const MAX_BATCH_RECORDS = 4096;
/** Read attempts before 'busy' (document 1 part 7: "ring header torn after 16 samples"). */
export const TORN_SAMPLE_LIMIT = 16;
/**
 * Ring capacity ceiling (profile decision). ceil(retention_ms * 1e6 / cycle_ns) can reach 3.6e6 records
 * (1 h at 1 ms), which at 16 axes would be 19 GB of shared memory. The ring holds at most 2^20 records
 * (about 17.5 min at 1 ms) and at most 4 GiB of slots, whichever is smaller.
 */
export const MAX_RING_RECORDS = 1 << 20;
export const MAX_RING_BYTES = 2 ** 32;

// ---------------------------------------------------------------------------------------------------
// Field tables, typed in from document 1 part 2 in documented offset order: [name, type, offset].

export type Scalar = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'u64' | 'i64';
export type Arr = 'u8[16]' | 'i32[16]';
export type CaptureFieldType = Scalar | Arr;
export type Field = readonly [name: string, type: CaptureFieldType, offset: number];

export const BYTES: Readonly<Record<CaptureFieldType, number>> = {
  u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, 'u8[16]': 16, 'i32[16]': 64,
};

/** CycleCaptureRecordV2 before `ax`. */
export const RECORD_TABLE = [
  ['t_ns', 'u64', 0],
  ['seq', 'u64', 8],
  ['cycle', 'u64', 16],
  ['work_ns', 'u64', 24],
  ['axes', 'u32', 32],
  ['reserved', 'u32', 36],
  ['cycle_jitter_ns', 'i64', 40],
  ['active_traj_id', 'u64', 48],
  ['active_command_seq', 'u64', 56],
  ['jog_generation', 'u64', 64],
  ['app_grant_generation', 'u64', 72],
  ['control_generation', 'u64', 80],
  ['configuration_epoch', 'u64', 88],
  ['home_epoch', 'u64', 96],
  ['grant_deadline_host_ns', 'u64', 104],
  ['jog_input_deadline_host_ns', 'u64', 112],
  ['jog_source_sequence', 'u64', 120],
  ['bus_submission_return_code', 'i64', 128],
  ['armed', 'u32', 136],
  ['axis_enable_mask', 'u32', 140],
  ['active_mode', 'u32', 144],
  ['state', 'u32', 148],
  ['current_point_index', 'u32', 152],
  ['queue_depth', 'u32', 156],
  ['last_event_code', 'u32', 160],
  ['underrun_count', 'u32', 164],
  ['stale_command_flag', 'u32', 168],
  ['motion_done', 'u32', 172],
  ['capability_flags', 'u32', 176],
  ['jog_session_open', 'u32', 180],
  ['jog_has_input', 'u32', 184],
  ['jog_axis_mask', 'u32', 188],
  ['jog_ramping', 'u32', 192],
  ['grant_active', 'u32', 196],
  ['grant_axis_mask', 'u32', 200],
  ['safety_fault_mask', 'u32', 204],
  ['execution_fault_reasons', 'u32', 208],
  ['submitted_axis_mask', 'u32', 212],
  ['bus_submission_operation', 'u32', 216],
  ['pdo_fresh_axis_mask', 'u32', 220],
  ['config_verified_mask', 'u32', 224],
  ['home_valid_mask', 'u32', 228],
  ['service_mode_axis_mask', 'u32', 232],
  ['wkc_actual', 'u32', 236],
  ['wkc_expected', 'u32', 240],
  ['master_state', 'u32', 244],
  ['io_configured', 'u32', 248],
  ['io_input_word', 'u32', 252],
  ['io_output_word', 'u32', 256],
  ['io_input_valid', 'u32', 260],
  ['io_armed', 'u32', 264],
  ['io_reason', 'u32', 268],
] as const satisfies readonly Field[];

/** CycleCaptureAxisV2 (320 bytes). */
export const AXIS_TABLE = [
  ['position', 'i32', 0],
  ['target', 'i32', 4],
  ['statusword', 'u16', 8],
  ['error_code', 'u16', 10],
  ['manufacturer_error_code', 'u32', 12],
  ['absolute_value', 'i32[16]', 16],
  ['absolute_valid', 'u8[16]', 80],
  ['velocity_actual_counts_per_s', 'i32', 96],
  ['following_error_counts', 'i32', 100],
  ['velocity_actual_valid', 'u32', 104],
  ['following_error_valid', 'u32', 108],
  ['di_bits', 'u32', 112],
  ['di_valid', 'u32', 116],
  ['external_enable_active', 'u32', 120],
  ['external_enable_valid', 'u32', 124],
  ['coordinate_counts', 'i64', 128],
  ['coordinate_epoch', 'u64', 136],
  ['pdo_observed_time_ns', 'u64', 144],
  ['collision_peak_following_error_counts', 'u64', 152],
  ['collision_trip_count', 'u64', 160],
  ['collision_samples', 'u64', 168],
  ['collision_last_trip_peak_following_error_counts', 'u64', 176],
  ['absolute_source_counts', 'i32', 184],
  ['coordinate_reason', 'u32', 188],
  ['target_velocity_counts_per_s', 'i32', 192],
  ['collision_armed', 'u32', 196],
  ['collision_torque_cycles', 'u32', 200],
  ['collision_following_error_cycles', 'u32', 204],
  ['collision_peak_torque_raw', 'u32', 208],
  ['collision_last_trip_quantity', 'u32', 212],
  ['collision_trip_sustained_cycles', 'u32', 216],
  ['collision_last_trip_peak_torque_raw', 'u32', 220],
  ['brake_state', 'u32', 224],
  ['native_home_position_offset', 'i32', 228],
  ['native_home_last_abort_code', 'u32', 232],
  ['ext_position_error_counts', 'i32', 236],
  ['ext_multi_turn_lo', 'i32', 240],
  ['ext_multi_turn_hi', 'i32', 244],
  ['max_abs_velocity_actual_counts_per_s', 'u32', 248],
  ['max_abs_following_error_counts', 'u32', 252],
  ['torque_raw', 'i16', 256],
  ['ext_bus_voltage_raw', 'u16', 258],
  ['ext_load_rate_raw', 'u16', 260],
  ['ext_igbt_temp_raw', 'i16', 262],
  ['ext_motor_temp_raw', 'i16', 264],
  ['ext_drive_not_ready_bits', 'u16', 266],
  ['ext_motor_not_rotating_code', 'u16', 268],
  ['ext_valid_mask', 'u16', 270],
  ['mode_display', 'i8', 272],
  ['ds402_state', 'u8', 273],
  ['torque_valid', 'u8', 274],
  ['coordinate_valid', 'u8', 275],
  ['coordinate_source_valid', 'u8', 276],
  ['native_home_state', 'u8', 277],
  ['slave_al_state', 'u8', 278],
  ['slave_online', 'u8', 279],
  ['slave_operational', 'u8', 280],
  ['pdo_fresh', 'u8', 281],
  ['target_velocity_valid', 'u8', 282],
  ['ext_valid', 'u8', 283],
  ['calibration_valid', 'u8', 284],
  ['position_state', 'u8', 285],
  ['audit_reason', 'u16', 286],
  ['audit_last_verified_ns', 'u64', 288],
  ['audit_started_ns', 'u64', 296],
  ['audit_completed_ns', 'u64', 304],
  ['audit_coherence_error_counts', 'u64', 312],
] as const satisfies readonly Field[];

export type RecordTable = typeof RECORD_TABLE;
export type AxisTable = typeof AXIS_TABLE;
export type RecordFieldName = RecordTable[number][0];
export type AxisFieldName = AxisTable[number][0];

export type ValueFor<T extends CaptureFieldType> = T extends 'u64' | 'i64' ? bigint : T extends Arr ? ArrayLike<number> : number;
export type Struct<F extends readonly Field[]> = { [E in F[number] as E[0]]: ValueFor<E[1]> };
/** Values of CycleCaptureRecordV2's fields before `ax` (u64/i64 as bigint). */
export type RecordFields = Struct<RecordTable>;
/** Values of CycleCaptureAxisV2's fields (u64/i64 as bigint, arrays of up to 16 numbers). */
export type AxisFields = Struct<AxisTable>;

export function offsets<F extends readonly Field[]>(table: F): { readonly [E in F[number] as E[0]]: number } {
  // Object.fromEntries gives V8 fast properties; assigning 50+ computed keys one by one would leave a
  // dictionary-mode object whose every `REC.x` in the cycle is a hash lookup (measured 10x slower).
  return Object.freeze(Object.fromEntries(table.map(([name, , offset]) => [name, offset]))) as { readonly [E in F[number] as E[0]]: number };
}

/** Record-relative offsets of CycleCaptureRecordV2's fields, e.g. `REC.t_ns` (0), `REC.io_reason` (268). */
export const REC = offsets(RECORD_TABLE);
/** Axis-relative offsets of CycleCaptureAxisV2's fields; add `axisOffset(i)` for a record-relative offset. */
export const AX = offsets(AXIS_TABLE);

/** Record-relative offset of axis slot `i` (0..15). */
export function axisOffset(i: number): number {
  return AXIS_ARRAY_OFFSET + i * AXIS_BYTES;
}

// The tables must tile their structs exactly; checked once at load so an editing slip cannot ship.
export function checkTiling(table: readonly Field[], size: number, what: string): void {
  let at = 0;
  for (const [name, type, offset] of table) {
    if (offset !== at) throw new Error(`${what}.${name} at ${offset}, expected ${at}`);
    at += BYTES[type];
  }
  if (at !== size) throw new Error(`${what} fields end at ${at}, expected ${size}`);
}
checkTiling(RECORD_TABLE, AXIS_ARRAY_OFFSET, 'CycleCaptureRecordV2');
checkTiling(AXIS_TABLE, AXIS_BYTES, 'CycleCaptureAxisV2');
if (AXIS_ARRAY_OFFSET + AXIS_SLOTS * AXIS_BYTES !== RECORD_BYTES) throw new Error('record size does not add up');

// ---------------------------------------------------------------------------------------------------
// Record layout digest (docs/profile.md "Harness oracle / Telemetry").

export const line = ([name, type, offset]: Field): string => `${offset} ${type} ${name}\n`;

/** The canonical layout text (122 lines, 3154 bytes). */
export const RECORD_LAYOUT_TEXT: string =
  `CycleCaptureRecordV2 ${RECORD_BYTES}\n` +
  RECORD_TABLE.map(line).join('') +
  `${AXIS_ARRAY_OFFSET} CycleCaptureAxisV2[${AXIS_SLOTS}] ax\n` +
  `CycleCaptureAxisV2 ${AXIS_BYTES}\n` +
  AXIS_TABLE.map(line).join('');

/** SHA-256 of RECORD_LAYOUT_TEXT, lowercase hex: the header's record_layout_digest. */
export const RECORD_LAYOUT_DIGEST: string = createHash('sha256').update(RECORD_LAYOUT_TEXT, 'utf8').digest('hex');

// ---------------------------------------------------------------------------------------------------
// Ring capacity.

/** Records one slot holds for `axisCount` axes: the record without its unused axis slots. */
export function slotBytes(axisCount: number): number {
  return AXIS_ARRAY_OFFSET + axisCount * AXIS_BYTES;
}

/**
 * ceil(retention_ms * 1e6 / cycle_ns), at least 1, at most MAX_RING_RECORDS and MAX_RING_BYTES / slot.
 * `axisCount` defaults to 16 (the byte ceiling then uses full records).
 */
export function ringCapacity(retentionMs: number | bigint, cycleNs: number | bigint, axisCount = AXIS_SLOTS): number {
  const ms = BigInt(retentionMs);
  const ns = BigInt(cycleNs);
  if (ms <= 0n || ns <= 0n) throw new RangeError(`retention_ms ${ms} and cycle_ns ${ns} must be positive`);
  const wanted = (ms * 1_000_000n + ns - 1n) / ns;
  const ceiling = Math.min(MAX_RING_RECORDS, Math.floor(MAX_RING_BYTES / slotBytes(axisCount)));
  return wanted > BigInt(ceiling) ? ceiling : Math.max(1, Number(wanted));
}

// ---------------------------------------------------------------------------------------------------
// TelemetryBatchHeaderV1.

export interface BatchHeaderFields {
  /** 32 lowercase hex: the service process identity. */
  adapter_incarnation: string;
  /** 32 lowercase hex: the core process identity, owner of the sequence numbers. */
  daemon_incarnation: string;
  /** 64 lowercase hex each. */
  machine_sha256: string;
  deployment_sha256: string;
  /** Defaults to RECORD_LAYOUT_DIGEST. */
  record_layout_digest?: string;
  cycle_period_ns: bigint;
  first_sequence: bigint;
  last_sequence: bigint;
  dropped: bigint;
  axis_count: number;
  record_count: number;
}

export function putHex(out: Uint8Array, at: number, text: string, re: RegExp, name: string): void {
  if (typeof text !== 'string' || !re.test(text)) throw new RangeError(`${name} must be ${re === HEX32 ? 32 : 64} lowercase hex characters`);
  for (let k = 0; k < text.length; k++) out[at + k] = text.charCodeAt(k);
}

export function u64(v: bigint, name: string): bigint {
  if (typeof v !== 'bigint' || v < 0n || v > U64_MAX) throw new RangeError(`${name} ${String(v)} is not a u64`);
  return v;
}

/**
 * Writes the 312-byte TelemetryBatchHeaderV1 into out[0..312) (a new array when omitted) and returns
 * `out`. Checks the hex fields, axis_count 1..16, record_count 0..4096 and the sequence shape of part 4
 * (empty: first 0; otherwise last = first + record_count - 1, first >= 1).
 */
export function encodeBatchHeader(h: BatchHeaderFields, out: Uint8Array = new Uint8Array(HEADER_BYTES)): Uint8Array {
  if (out.length < HEADER_BYTES) throw new RangeError(`header needs ${HEADER_BYTES} bytes`);
  const first = u64(h.first_sequence, 'first_sequence');
  const last = u64(h.last_sequence, 'last_sequence');
  const dropped = u64(h.dropped, 'dropped');
  const cycle = u64(h.cycle_period_ns, 'cycle_period_ns');
  if (!Number.isInteger(h.axis_count) || h.axis_count < 1 || h.axis_count > AXIS_SLOTS) throw new RangeError(`axis_count ${h.axis_count} is outside 1..16`);
  if (!Number.isInteger(h.record_count) || h.record_count < 0 || h.record_count > MAX_BATCH_RECORDS) throw new RangeError(`record_count ${h.record_count} is outside 0..4096`);
  if (h.record_count === 0 ? first !== 0n : first === 0n || last !== first + BigInt(h.record_count - 1)) {
    throw new RangeError(`first_sequence ${first} / last_sequence ${last} do not fit record_count ${h.record_count}`);
  }
  const dv = new DataView(out.buffer, out.byteOffset, HEADER_BYTES);
  dv.setUint32(0, BATCH_MAGIC, true);
  dv.setUint16(4, BATCH_VERSION, true);
  dv.setUint16(6, HEADER_BYTES, true);
  putHex(out, 8, h.adapter_incarnation, HEX32, 'adapter_incarnation');
  putHex(out, 40, h.machine_sha256, HEX64, 'machine_sha256');
  putHex(out, 104, h.deployment_sha256, HEX64, 'deployment_sha256');
  putHex(out, 168, h.record_layout_digest ?? RECORD_LAYOUT_DIGEST, HEX64, 'record_layout_digest');
  dv.setBigUint64(232, cycle, true);
  dv.setBigUint64(240, first, true);
  dv.setBigUint64(248, last, true);
  dv.setBigUint64(256, dropped, true);
  dv.setUint32(264, h.axis_count, true);
  dv.setUint32(268, h.record_count, true);
  dv.setUint32(272, RECORD_BYTES, true);
  dv.setUint32(276, 0, true);
  putHex(out, 280, h.daemon_incarnation, HEX32, 'daemon_incarnation');
  return out;
}

