// Telemetry batch codec: document 1 part 2 "Telemetry binary records (little-endian)" and part 4
// "Observation endpoints" (cursor rules, stream framing). Every layout fact lives in the three field
// tables below; decoder, encoder, record types and the layout digest text are all derived from them.

import { fail } from './errors.ts';
import { sha256Hex } from './json.ts';

export const TELEMETRY_MAGIC = 0x31425452;
export const TELEMETRY_VERSION = 1;
export const HEADER_BYTES = 312;
export const RECORD_BYTES = 5392;
export const AXIS_BYTES = 320;
export const AXIS_SLOTS = 16;
export const AXIS_ARRAY_OFFSET = 272;
export const MAX_RECORDS = 4096;
export const MAX_AXIS_COUNT = 16;
export const MAX_BATCH_BYTES = HEADER_BYTES + MAX_RECORDS * RECORD_BYTES; // 22085944

type ScalarType = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'u64' | 'i64';
type ArrayType = 'u8[16]' | 'i32[16]';
type FieldType = ScalarType | ArrayType;
type FieldSpec = readonly [offset: number, type: FieldType, name: string];

const SIZE: Readonly<Record<FieldType, number>> = {
  u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, 'u8[16]': 16, 'i32[16]': 64,
};

/** CycleCaptureRecordV2 fields before `ax` (document 1 part 2), in offset order. */
export const RECORD_FIELDS = [
  [0, 'u64', 't_ns'],
  [8, 'u64', 'seq'],
  [16, 'u64', 'cycle'],
  [24, 'u64', 'work_ns'],
  [32, 'u32', 'axes'],
  [36, 'u32', 'reserved'],
  [40, 'i64', 'cycle_jitter_ns'],
  [48, 'u64', 'active_traj_id'],
  [56, 'u64', 'active_command_seq'],
  [64, 'u64', 'jog_generation'],
  [72, 'u64', 'app_grant_generation'],
  [80, 'u64', 'control_generation'],
  [88, 'u64', 'configuration_epoch'],
  [96, 'u64', 'home_epoch'],
  [104, 'u64', 'grant_deadline_host_ns'],
  [112, 'u64', 'jog_input_deadline_host_ns'],
  [120, 'u64', 'jog_source_sequence'],
  [128, 'i64', 'bus_submission_return_code'],
  [136, 'u32', 'armed'],
  [140, 'u32', 'axis_enable_mask'],
  [144, 'u32', 'active_mode'],
  [148, 'u32', 'state'],
  [152, 'u32', 'current_point_index'],
  [156, 'u32', 'queue_depth'],
  [160, 'u32', 'last_event_code'],
  [164, 'u32', 'underrun_count'],
  [168, 'u32', 'stale_command_flag'],
  [172, 'u32', 'motion_done'],
  [176, 'u32', 'capability_flags'],
  [180, 'u32', 'jog_session_open'],
  [184, 'u32', 'jog_has_input'],
  [188, 'u32', 'jog_axis_mask'],
  [192, 'u32', 'jog_ramping'],
  [196, 'u32', 'grant_active'],
  [200, 'u32', 'grant_axis_mask'],
  [204, 'u32', 'safety_fault_mask'],
  [208, 'u32', 'execution_fault_reasons'],
  [212, 'u32', 'submitted_axis_mask'],
  [216, 'u32', 'bus_submission_operation'],
  [220, 'u32', 'pdo_fresh_axis_mask'],
  [224, 'u32', 'config_verified_mask'],
  [228, 'u32', 'home_valid_mask'],
  [232, 'u32', 'service_mode_axis_mask'],
  [236, 'u32', 'wkc_actual'],
  [240, 'u32', 'wkc_expected'],
  [244, 'u32', 'master_state'],
  [248, 'u32', 'io_configured'],
  [252, 'u32', 'io_input_word'],
  [256, 'u32', 'io_output_word'],
  [260, 'u32', 'io_input_valid'],
  [264, 'u32', 'io_armed'],
  [268, 'u32', 'io_reason'],
] as const satisfies readonly FieldSpec[];

/** CycleCaptureAxisV2, 320 bytes (document 1 part 2), in offset order. */
export const AXIS_FIELDS = [
  [0, 'i32', 'position'],
  [4, 'i32', 'target'],
  [8, 'u16', 'statusword'],
  [10, 'u16', 'error_code'],
  [12, 'u32', 'manufacturer_error_code'],
  [16, 'i32[16]', 'absolute_value'],
  [80, 'u8[16]', 'absolute_valid'],
  [96, 'i32', 'velocity_actual_counts_per_s'],
  [100, 'i32', 'following_error_counts'],
  [104, 'u32', 'velocity_actual_valid'],
  [108, 'u32', 'following_error_valid'],
  [112, 'u32', 'di_bits'],
  [116, 'u32', 'di_valid'],
  [120, 'u32', 'external_enable_active'],
  [124, 'u32', 'external_enable_valid'],
  [128, 'i64', 'coordinate_counts'],
  [136, 'u64', 'coordinate_epoch'],
  [144, 'u64', 'pdo_observed_time_ns'],
  [152, 'u64', 'collision_peak_following_error_counts'],
  [160, 'u64', 'collision_trip_count'],
  [168, 'u64', 'collision_samples'],
  [176, 'u64', 'collision_last_trip_peak_following_error_counts'],
  [184, 'i32', 'absolute_source_counts'],
  [188, 'u32', 'coordinate_reason'],
  [192, 'i32', 'target_velocity_counts_per_s'],
  [196, 'u32', 'collision_armed'],
  [200, 'u32', 'collision_torque_cycles'],
  [204, 'u32', 'collision_following_error_cycles'],
  [208, 'u32', 'collision_peak_torque_raw'],
  [212, 'u32', 'collision_last_trip_quantity'],
  [216, 'u32', 'collision_trip_sustained_cycles'],
  [220, 'u32', 'collision_last_trip_peak_torque_raw'],
  [224, 'u32', 'brake_state'],
  [228, 'i32', 'native_home_position_offset'],
  [232, 'u32', 'native_home_last_abort_code'],
  [236, 'i32', 'ext_position_error_counts'],
  [240, 'i32', 'ext_multi_turn_lo'],
  [244, 'i32', 'ext_multi_turn_hi'],
  [248, 'u32', 'max_abs_velocity_actual_counts_per_s'],
  [252, 'u32', 'max_abs_following_error_counts'],
  [256, 'i16', 'torque_raw'],
  [258, 'u16', 'ext_bus_voltage_raw'],
  [260, 'u16', 'ext_load_rate_raw'],
  [262, 'i16', 'ext_igbt_temp_raw'],
  [264, 'i16', 'ext_motor_temp_raw'],
  [266, 'u16', 'ext_drive_not_ready_bits'],
  [268, 'u16', 'ext_motor_not_rotating_code'],
  [270, 'u16', 'ext_valid_mask'],
  [272, 'i8', 'mode_display'],
  [273, 'u8', 'ds402_state'],
  [274, 'u8', 'torque_valid'],
  [275, 'u8', 'coordinate_valid'],
  [276, 'u8', 'coordinate_source_valid'],
  [277, 'u8', 'native_home_state'],
  [278, 'u8', 'slave_al_state'],
  [279, 'u8', 'slave_online'],
  [280, 'u8', 'slave_operational'],
  [281, 'u8', 'pdo_fresh'],
  [282, 'u8', 'target_velocity_valid'],
  [283, 'u8', 'ext_valid'],
  [284, 'u8', 'calibration_valid'],
  [285, 'u8', 'position_state'],
  [286, 'u16', 'audit_reason'],
  [288, 'u64', 'audit_last_verified_ns'],
  [296, 'u64', 'audit_started_ns'],
  [304, 'u64', 'audit_completed_ns'],
  [312, 'u64', 'audit_coherence_error_counts'],
] as const satisfies readonly FieldSpec[];

type HeaderFieldType = 'u16' | 'u32' | 'u64' | 'hex32' | 'hex64';
/** TelemetryBatchHeaderV1, 312 bytes. The u8[32]/u8[64] fields are lowercase hex text. */
export const HEADER_FIELDS = [
  [0, 'u32', 'magic'],
  [4, 'u16', 'version'],
  [6, 'u16', 'header_bytes'],
  [8, 'hex32', 'adapter_incarnation'],
  [40, 'hex64', 'machine_sha256'],
  [104, 'hex64', 'deployment_sha256'],
  [168, 'hex64', 'record_layout_digest'],
  [232, 'u64', 'cycle_period_ns'],
  [240, 'u64', 'first_sequence'],
  [248, 'u64', 'last_sequence'],
  [256, 'u64', 'dropped'],
  [264, 'u32', 'axis_count'],
  [268, 'u32', 'record_count'],
  [272, 'u32', 'record_bytes'],
  [276, 'u32', 'reserved'],
  [280, 'hex32', 'daemon_incarnation'],
] as const satisfies readonly (readonly [number, HeaderFieldType, string])[];

type ValueOf<T> = T extends 'u64' | 'i64' ? bigint : T extends ArrayType ? number[] : T extends 'hex32' | 'hex64' ? string : number;
type StructOf<F extends readonly (readonly [number, string, string])[]> = { [E in F[number] as E[2]]: ValueOf<E[1]> };

export type CycleCaptureAxisV2 = StructOf<typeof AXIS_FIELDS>;
export type CycleCaptureRecordV2 = StructOf<typeof RECORD_FIELDS> & { ax: CycleCaptureAxisV2[] };
export type TelemetryBatchHeaderV1 = StructOf<typeof HEADER_FIELDS>;

export interface TelemetryBatch {
  header: TelemetryBatchHeaderV1;
  records: CycleCaptureRecordV2[];
}

// ---------------------------------------------------------------------------------------------
// Record layout digest (profile: the documents say the header carries it, not how it is computed).

function layoutLines(fields: readonly FieldSpec[]): string[] {
  return fields.map(([offset, type, name]) => `${offset} ${type} ${name}\n`);
}

/** Canonical layout text; its SHA-256 (lowercase hex) is RECORD_LAYOUT_DIGEST. Recipe in docs/profile.md "Harness oracle". */
export const RECORD_LAYOUT_TEXT = [
  `CycleCaptureRecordV2 ${RECORD_BYTES}\n`,
  ...layoutLines(RECORD_FIELDS),
  `${AXIS_ARRAY_OFFSET} CycleCaptureAxisV2[${AXIS_SLOTS}] ax\n`,
  `CycleCaptureAxisV2 ${AXIS_BYTES}\n`,
  ...layoutLines(AXIS_FIELDS),
].join('');

export const RECORD_LAYOUT_DIGEST = sha256Hex(RECORD_LAYOUT_TEXT);

// ---------------------------------------------------------------------------------------------
// Field access.

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function readScalar(dv: DataView, at: number, type: ScalarType): number | bigint {
  switch (type) {
    case 'u8': return dv.getUint8(at);
    case 'i8': return dv.getInt8(at);
    case 'u16': return dv.getUint16(at, true);
    case 'i16': return dv.getInt16(at, true);
    case 'u32': return dv.getUint32(at, true);
    case 'i32': return dv.getInt32(at, true);
    case 'u64': return dv.getBigUint64(at, true);
    case 'i64': return dv.getBigInt64(at, true);
  }
}

function readField(dv: DataView, at: number, type: FieldType): number | bigint | number[] {
  if (type === 'u8[16]' || type === 'i32[16]') {
    const elem: ScalarType = type === 'u8[16]' ? 'u8' : 'i32';
    const step = SIZE[elem];
    const out: number[] = [];
    for (let k = 0; k < 16; k++) out.push(readScalar(dv, at + k * step, elem) as number);
    return out;
  }
  return readScalar(dv, at, type);
}

function writeScalar(dv: DataView, at: number, type: ScalarType, v: number | bigint, name: string): void {
  const n = typeof v === 'bigint' ? v : BigInt(v);
  const bits = SIZE[type] * 8;
  const signed = type.startsWith('i');
  const min = signed ? -(1n << BigInt(bits - 1)) : 0n;
  const max = signed ? (1n << BigInt(bits - 1)) - 1n : (1n << BigInt(bits)) - 1n;
  if (n < min || n > max) fail('telemetry_encode_range', `${name}=${n} does not fit ${type}`, { field: name });
  switch (type) {
    case 'u8': return dv.setUint8(at, Number(n));
    case 'i8': return dv.setInt8(at, Number(n));
    case 'u16': return dv.setUint16(at, Number(n), true);
    case 'i16': return dv.setInt16(at, Number(n), true);
    case 'u32': return dv.setUint32(at, Number(n), true);
    case 'i32': return dv.setInt32(at, Number(n), true);
    case 'u64': return dv.setBigUint64(at, n, true);
    case 'i64': return dv.setBigInt64(at, n, true);
  }
}

function writeField(dv: DataView, at: number, type: FieldType, v: unknown, name: string): void {
  if (v === undefined) return; // the buffer is zero-filled
  if (type === 'u8[16]' || type === 'i32[16]') {
    const elem: ScalarType = type === 'u8[16]' ? 'u8' : 'i32';
    const arr = v as ArrayLike<number>;
    if (arr.length > 16) fail('telemetry_encode_range', `${name} has more than 16 entries`, { field: name });
    for (let k = 0; k < arr.length; k++) writeScalar(dv, at + k * SIZE[elem], elem, arr[k] ?? 0, name);
    return;
  }
  writeScalar(dv, at, type, v as number | bigint, name);
}

export function decodeStruct(dv: DataView, base: number, fields: readonly FieldSpec[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [offset, type, name] of fields) out[name] = readField(dv, base + offset, type);
  return out;
}

const GETTER: Readonly<Record<ScalarType, string>> = {
  u8: 'getUint8', i8: 'getInt8', u16: 'getUint16', i16: 'getInt16', u32: 'getUint32', i32: 'getInt32', u64: 'getBigUint64', i64: 'getBigInt64',
};

/**
 * The same decoding as decodeStruct, as one function generated from the field table: an object literal
 * of DataView reads. A test that reads a few seconds of telemetry decodes thousands of 5392-byte
 * records, and the table-walking form spends most of its time dispatching on the type. Equality with
 * decodeStruct is tested (harness/oracle/telemetry.test.ts).
 */
export function compileStructDecoder(fields: readonly FieldSpec[]): (dv: DataView, base: number) => Record<string, unknown> {
  const read = (at: number, type: ScalarType) => `dv.${GETTER[type]}(b + ${at}${SIZE[type] > 1 ? ', true' : ''})`;
  const expr = (offset: number, type: FieldType): string => {
    if (type !== 'u8[16]' && type !== 'i32[16]') return read(offset, type);
    const elem: ScalarType = type === 'u8[16]' ? 'u8' : 'i32';
    return `[${Array.from({ length: 16 }, (_, k) => read(offset + k * SIZE[elem], elem)).join(', ')}]`;
  };
  for (const [offset, type] of fields) if (!Number.isSafeInteger(offset) || !(type in SIZE)) throw new Error(`bad field spec ${offset} ${type}`);
  const body = fields.map(([offset, type, name]) => `${JSON.stringify(name)}: ${expr(offset, type)}`).join(',\n');
  return new Function('dv', 'b', `return {\n${body}\n};`) as (dv: DataView, base: number) => Record<string, unknown>;
}

let recordDecoder: ((dv: DataView, base: number) => Record<string, unknown>) | undefined;
let axisDecoder: ((dv: DataView, base: number) => Record<string, unknown>) | undefined;

// ---------------------------------------------------------------------------------------------
// Decoder.

export interface DecodeOptions {
  /** Record layout digest the reader expects; default RECORD_LAYOUT_DIGEST. */
  expectedLayoutDigest?: string;
  /** Refuse a batch whose axis slots at or beyond axis_count are not all zero. Default true. */
  checkUnusedAxes?: boolean;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX64 = /^[0-9a-f]{64}$/;

function ascii(bytes: Uint8Array, at: number, length: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + at, length).toString('latin1');
}

/**
 * Reads and checks a header in the documented order (magic, version, header_bytes, record_bytes,
 * layout digest, axis_count, record_count) before anything of the body is read. `bytes` must hold
 * at least the 312 header bytes; the body length is checked by decodeBatch.
 */
export function decodeBatchHeader(bytes: Uint8Array, opts: DecodeOptions = {}): TelemetryBatchHeaderV1 {
  if (bytes.length < HEADER_BYTES) fail('telemetry_truncated', `${bytes.length} bytes cannot hold the ${HEADER_BYTES}-byte header`, { length: bytes.length });
  const dv = view(bytes);
  const magic = dv.getUint32(0, true);
  if (magic !== TELEMETRY_MAGIC) fail('telemetry_magic', `magic 0x${magic.toString(16)} is not 0x31425452`, { magic });
  const version = dv.getUint16(4, true);
  if (version !== TELEMETRY_VERSION) fail('telemetry_version', `version ${version} is not 1`, { version });
  const headerBytes = dv.getUint16(6, true);
  if (headerBytes !== HEADER_BYTES) fail('telemetry_header_bytes', `header_bytes ${headerBytes} is not 312`, { header_bytes: headerBytes });
  const recordBytes = dv.getUint32(272, true);
  if (recordBytes !== RECORD_BYTES) fail('telemetry_record_bytes', `record_bytes ${recordBytes} is not 5392`, { record_bytes: recordBytes });
  const expected = opts.expectedLayoutDigest ?? RECORD_LAYOUT_DIGEST;
  const actual = ascii(bytes, 168, 64);
  if (actual !== expected) {
    fail('telemetry_layout_mismatch', `record layout digest ${JSON.stringify(actual)} differs from expected ${expected}`, { expected, actual });
  }
  const axisCount = dv.getUint32(264, true);
  if (axisCount < 1 || axisCount > MAX_AXIS_COUNT) fail('telemetry_axis_count', `axis_count ${axisCount} is outside 1..16`, { axis_count: axisCount });
  const recordCount = dv.getUint32(268, true);
  if (recordCount > MAX_RECORDS) fail('telemetry_record_count', `record_count ${recordCount} exceeds 4096`, { record_count: recordCount });

  const header = {} as Record<string, unknown>;
  for (const [offset, type, name] of HEADER_FIELDS) {
    if (type === 'hex32' || type === 'hex64') {
      const text = ascii(bytes, offset, type === 'hex32' ? 32 : 64);
      if (!(type === 'hex32' ? HEX32 : HEX64).test(text)) fail('telemetry_hex_field', `${name} is not lowercase hex`, { field: name });
      header[name] = text;
    } else {
      header[name] = readScalar(dv, offset, type);
    }
  }
  if (header.reserved !== 0) fail('telemetry_reserved', 'header reserved field is not 0', { reserved: header.reserved as number });
  return header as TelemetryBatchHeaderV1;
}

/** Total byte length of the batch a (checked) header announces. */
export function batchLength(header: Pick<TelemetryBatchHeaderV1, 'record_count'>): number {
  return HEADER_BYTES + header.record_count * RECORD_BYTES;
}

export function decodeRecord(bytes: Uint8Array, offset = 0): CycleCaptureRecordV2 {
  if (offset < 0 || offset + RECORD_BYTES > bytes.length) fail('telemetry_truncated', `no full record at offset ${offset}`, { offset });
  const dv = view(bytes);
  recordDecoder ??= compileStructDecoder(RECORD_FIELDS);
  axisDecoder ??= compileStructDecoder(AXIS_FIELDS);
  const record = recordDecoder(dv, offset);
  const ax: Record<string, unknown>[] = [];
  for (let a = 0; a < AXIS_SLOTS; a++) ax.push(axisDecoder(dv, offset + AXIS_ARRAY_OFFSET + a * AXIS_BYTES));
  record.ax = ax;
  return record as CycleCaptureRecordV2;
}

function isZero(bytes: Uint8Array, from: number, to: number): boolean {
  for (let k = from; k < to; k++) if (bytes[k] !== 0) return false;
  return true;
}

/** Decodes one complete batch: header checks, exact length, unused axes zero, sequence consistency. */
export function decodeBatch(bytes: Uint8Array, opts: DecodeOptions = {}): TelemetryBatch {
  const header = decodeSizedHeader(bytes, opts);
  const records: CycleCaptureRecordV2[] = [];
  for (let r = 0; r < header.record_count; r++) records.push(batchRecord(bytes, header, r, opts));
  checkBatchSequences(header, records);
  return { header, records };
}

/** How many records decodeBatchYielding decodes between turns of the event loop (about 30 ms of work). */
export const YIELD_EVERY_RECORDS = 256;

/**
 * decodeBatch, giving the event loop a turn every YIELD_EVERY_RECORDS records: the same checks, the same
 * result or the same failure. A full batch (4096 records, 70 000 objects) takes half a second or more to
 * decode; in one piece it held up every timer of the harness's thread that long, and on a rig a bench box
 * whose heartbeat watchdog allows 500 ms opened the E-stop chain under it (docs/benchbox.md).
 */
export async function decodeBatchYielding(bytes: Uint8Array, opts: DecodeOptions = {}): Promise<TelemetryBatch> {
  const header = decodeSizedHeader(bytes, opts);
  const records: CycleCaptureRecordV2[] = [];
  for (let r = 0; r < header.record_count; r++) {
    if (r > 0 && r % YIELD_EVERY_RECORDS === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    records.push(batchRecord(bytes, header, r, opts));
  }
  checkBatchSequences(header, records);
  return { header, records };
}

/** Record `r` of a batch whose header and length are checked, its unused axis slots checked zero unless told not to. */
function batchRecord(bytes: Uint8Array, header: TelemetryBatchHeaderV1, r: number, opts: DecodeOptions): CycleCaptureRecordV2 {
  const at = HEADER_BYTES + r * RECORD_BYTES;
  if (opts.checkUnusedAxes ?? true) {
    const from = at + AXIS_ARRAY_OFFSET + header.axis_count * AXIS_BYTES;
    if (!isZero(bytes, from, at + RECORD_BYTES)) fail('telemetry_unused_axis_nonzero', `record ${r} has data in an axis slot at or beyond axis_count ${header.axis_count}`, { record: r });
  }
  return decodeRecord(bytes, at);
}

/** The header of a batch whose length is the one its record_count needs (decodeBatch, decodeBatchSequences). */
function decodeSizedHeader(bytes: Uint8Array, opts: DecodeOptions): TelemetryBatchHeaderV1 {
  const header = decodeBatchHeader(bytes, opts);
  const expectedLength = batchLength(header);
  if (bytes.length !== expectedLength) {
    fail('telemetry_length', `batch is ${bytes.length} bytes; record_count ${header.record_count} needs ${expectedLength}`, { length: bytes.length, expected: expectedLength });
  }
  return header;
}

/**
 * A batch's header and the sequence of each record, without decoding the records (a 4096-record batch is
 * 70 000 objects decoded; a cursor check needs one field of each). The same header, length and sequence
 * checks as decodeBatch.
 */
export function decodeBatchSequences(bytes: Uint8Array, opts: DecodeOptions = {}): { header: TelemetryBatchHeaderV1; seqs: bigint[] } {
  const header = decodeSizedHeader(bytes, opts);
  const seqAt = RECORD_FIELDS.find(([, , name]) => name === 'seq')![0];
  const dv = view(bytes);
  const seqs: bigint[] = [];
  for (let r = 0; r < header.record_count; r++) seqs.push(dv.getBigUint64(HEADER_BYTES + r * RECORD_BYTES + seqAt, true));
  checkBatchSequences(header, seqs.map((seq) => ({ seq })));
  return { header, seqs };
}

/**
 * Document 1 part 4: an empty batch has first_sequence 0; a non-empty one has contiguous sequences
 * from first_sequence to last_sequence.
 */
export function checkBatchSequences(header: TelemetryBatchHeaderV1, records: readonly Pick<CycleCaptureRecordV2, 'seq'>[]): void {
  if (records.length === 0) {
    if (header.first_sequence !== 0n) fail('telemetry_sequence', 'empty batch has nonzero first_sequence', { first_sequence: header.first_sequence });
    return;
  }
  if (header.first_sequence === 0n) fail('telemetry_sequence', 'non-empty batch has first_sequence 0');
  if (header.last_sequence !== header.first_sequence + BigInt(records.length - 1)) {
    fail('telemetry_sequence', 'last_sequence is not first_sequence + record_count - 1', { first_sequence: header.first_sequence, last_sequence: header.last_sequence });
  }
  records.forEach((rec, k) => {
    if (rec.seq !== header.first_sequence + BigInt(k)) fail('telemetry_sequence', `record ${k} has seq ${rec.seq}, expected ${header.first_sequence + BigInt(k)}`, { record: k });
  });
}

/**
 * Document 1 part 4 cursor rule for GET /v1/telemetry?after=<after>: a non-empty batch starts at
 * after + dropped + 1; an empty batch has last_sequence after + dropped. Returns the next cursor.
 */
export function checkBatchCursor(header: TelemetryBatchHeaderV1, after: bigint): bigint {
  if (header.record_count === 0) {
    if (header.last_sequence !== after + header.dropped) fail('telemetry_cursor', `empty batch last_sequence ${header.last_sequence} is not after + dropped = ${after + header.dropped}`);
  } else if (header.first_sequence !== after + header.dropped + 1n) {
    fail('telemetry_cursor', `batch starts at ${header.first_sequence}, expected after + dropped + 1 = ${after + header.dropped + 1n}`);
  }
  return header.last_sequence;
}

// ---------------------------------------------------------------------------------------------
// Stream splitter: GET /v1/telemetry/stream concatenates batches; boundaries come from each header,
// never from HTTP chunks (document 1 part 4).

export class BatchSplitter {
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  private need: number | undefined;

  constructor(private readonly opts: DecodeOptions = {}) {}

  /** Bytes held that do not yet form a complete batch. */
  get pending(): number {
    return this.buffered;
  }

  /** Feeds one chunk; returns every batch it completes, each as its own byte array. */
  push(chunk: Uint8Array): Uint8Array[] {
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const out: Uint8Array[] = [];
    for (;;) {
      if (this.need === undefined) {
        if (this.buffered < HEADER_BYTES) break;
        // Checking the header as soon as it is complete refuses a bad stream before buffering a body.
        this.need = batchLength(decodeBatchHeader(this.peek(HEADER_BYTES), this.opts));
      }
      if (this.buffered < this.need) break;
      out.push(this.take(this.need));
      this.need = undefined;
    }
    return out;
  }

  /** Call at end of stream: leftover bytes mean the stream ended inside a batch. */
  finish(): void {
    if (this.buffered !== 0) fail('telemetry_stream_truncated', `stream ended ${this.buffered} bytes into a batch`, { pending: this.buffered });
  }

  private peek(n: number): Uint8Array {
    const first = this.chunks[0];
    if (first !== undefined && first.length >= n) return first.subarray(0, n);
    const out = new Uint8Array(n);
    let filled = 0;
    for (const c of this.chunks) {
      const part = c.subarray(0, Math.min(c.length, n - filled));
      out.set(part, filled);
      filled += part.length;
      if (filled === n) break;
    }
    return out;
  }

  private take(n: number): Uint8Array {
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const c = this.chunks[0]!;
      const want = n - filled;
      if (c.length <= want) {
        out.set(c, filled);
        filled += c.length;
        this.chunks.shift();
      } else {
        out.set(c.subarray(0, want), filled);
        this.chunks[0] = c.subarray(want);
        filled += want;
      }
    }
    this.buffered -= n;
    return out;
  }
}

/** Splits a byte stream (for example an undici body) into complete batches. */
export async function* splitBatches(
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  opts: DecodeOptions = {},
): AsyncGenerator<Uint8Array, void, undefined> {
  const splitter = new BatchSplitter(opts);
  for await (const chunk of source) yield* splitter.push(chunk);
  splitter.finish();
}

// ---------------------------------------------------------------------------------------------
// Encoder: the oracle's own writer, for testing the decoder and for fixtures.

type Partialish<T> = { [K in keyof T]?: T[K] };
export type RecordInput = Partialish<StructOf<typeof RECORD_FIELDS>> & { ax?: Array<Partialish<CycleCaptureAxisV2>> };
export type HeaderInput = Partialish<TelemetryBatchHeaderV1>;

function zeroHex(n: number): string {
  return '0'.repeat(n);
}

/**
 * Writes a batch. Header defaults: the documented constants, record_count from records, axis_count 1,
 * zero hex identities, first/last_sequence from the records (0/0 when empty). Any header field can be
 * overridden, including the constants, so tests can build refused batches.
 */
export function encodeBatch(input: { header?: HeaderInput; records?: readonly RecordInput[] }): Uint8Array {
  const records = input.records ?? [];
  const first = records[0]?.seq ?? 0n;
  const last = records.at(-1)?.seq ?? 0n;
  const header: Record<string, unknown> = {
    magic: TELEMETRY_MAGIC,
    version: TELEMETRY_VERSION,
    header_bytes: HEADER_BYTES,
    adapter_incarnation: zeroHex(32),
    machine_sha256: zeroHex(64),
    deployment_sha256: zeroHex(64),
    record_layout_digest: RECORD_LAYOUT_DIGEST,
    cycle_period_ns: 1_000_000n,
    first_sequence: first,
    last_sequence: last,
    dropped: 0n,
    axis_count: 1,
    record_count: records.length,
    record_bytes: RECORD_BYTES,
    reserved: 0,
    daemon_incarnation: zeroHex(32),
    ...input.header,
  };
  const out = new Uint8Array(HEADER_BYTES + records.length * RECORD_BYTES);
  const dv = view(out);
  for (const [offset, type, name] of HEADER_FIELDS) {
    const v = header[name];
    if (type === 'hex32' || type === 'hex64') {
      const size = type === 'hex32' ? 32 : 64;
      const text = Buffer.from(String(v), 'latin1');
      if (text.length !== size) fail('telemetry_encode_range', `${name} must be ${size} characters`, { field: name });
      out.set(text, offset);
    } else {
      writeScalar(dv, offset, type, v as number | bigint, name);
    }
  }
  records.forEach((rec, r) => {
    const base = HEADER_BYTES + r * RECORD_BYTES;
    const recMap = rec as Record<string, unknown>;
    for (const [offset, type, name] of RECORD_FIELDS) writeField(dv, base + offset, type, recMap[name], name);
    const ax = rec.ax ?? [];
    if (ax.length > AXIS_SLOTS) fail('telemetry_encode_range', 'more than 16 axes', { record: r });
    ax.forEach((axis, a) => {
      const axMap = axis as Record<string, unknown>;
      for (const [offset, type, name] of AXIS_FIELDS) writeField(dv, base + AXIS_ARRAY_OFFSET + a * AXIS_BYTES + offset, type, axMap[name], name);
    });
  });
  return out;
}
