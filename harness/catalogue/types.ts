// Shape of the machine-readable catalogue of the three documents in ../shared/spec/.
// Every documented, testable item is one entry with a stable id. Tests name the ids they cover
// (see harness/trace.ts); the traceability gate compares covered ids with this catalogue.

export type DocumentNumber = 1 | 2 | 3;

/** Where in the documents an item comes from: document number and section heading text. */
export interface SpecRef {
  doc: DocumentNumber;
  /** e.g. "part 7 Errors: Authority and session" or "part 2 Telemetry binary records" */
  section: string;
}

interface EntryBase extends SpecRef {
  /** Stable id: `<family>:<name>`, lowercase family, name as the document spells it. */
  id: string;
  /** One line in our own words. */
  title: string;
}

/** A refusal label of document 1 part 7 (`reason:<label>`). */
export interface ReasonEntry extends EntryBase {
  family: 'reason';
  label: string;
  /** The part 7 group: envelope, authority, handles, native, program, dense, recovery, io, jog, telemetry. */
  group: string;
  /** Operation names (part 4) whose reason list names this label; empty when only the common sets apply. */
  operations: string[];
  /** HTTP status the label is returned with (409 unless documented otherwise). */
  http: number;
  /** Numeric native command reason when the document gives one. */
  native?: number;
  /** Numeric jog reason when the document gives one (outside_limits_outward: 15). */
  jogReason?: number;
}

/** A file-format reason of document 2 part 7 (`format_reason:<name>`). */
export interface FormatReasonEntry extends EntryBase {
  family: 'format_reason';
  reason: string;
  rule: string;
}

/** A dense_error reason of document 2 part 2 (`dense_error:<name>`). */
export interface DenseErrorEntry extends EntryBase {
  family: 'dense_error';
  reason: string;
}

/** One of the 33 capabilities of document 1 part 4 (`capability:<name>`). */
export interface CapabilityEntry extends EntryBase {
  family: 'capability';
  name: string;
  state: 'implemented' | 'interim' | 'test_only' | 'unimplemented';
  /** The Transport column as documented; `none` where it says no transport. */
  transport: string;
  fence: string;
  result: string;
}

/** One of the 25 event types of document 1 part 6 (`event:<type>`). */
export interface EventEntry extends EntryBase {
  family: 'event';
  type: string;
  payload: string;
  when: string;
}

/** A row of a transition table (`transition:<machine>:<from>-><to>:<trigger>`). */
export interface TransitionEntry extends EntryBase {
  family: 'transition';
  machine: 'handle' | 'grant';
  from: string;
  trigger: string;
  condition: string;
  to: string;
  also: string;
}

/** A documented limit (`limit:<name>`). */
export interface LimitEntry extends EntryBase {
  family: 'limit';
  name: string;
  /** Numeric facts as exact integers where integral (bigint) or numbers. */
  min?: bigint | number;
  max?: bigint | number;
  value?: bigint | number;
  unit?: string;
  text: string;
}

/** A field of a documented resource or document type (`field:<Type>.<path>`). */
export interface FieldEntry extends EntryBase {
  family: 'field';
  type: string;
  path: string;
  valueType: string;
  required?: boolean;
  rule: string;
}

/** A field of a documented binary layout (`layout:<struct>:<field>`). */
export interface LayoutEntry extends EntryBase {
  family: 'layout';
  struct: 'telemetry_header' | 'capture_record' | 'capture_axis' | 'dense_sample';
  field: string;
  offset: number;
  size: number;
  /** u8 u16 u32 u64 i8 i16 i32 i64 f64, arrays as `u8[32]`, `i32[16]` */
  type: string;
  note?: string;
}

/** Any other documented, testable statement (`rule:<area>.<name>`, `endpoint:...`, `planner:...`, `olp:...`). */
export interface RuleEntry extends EntryBase {
  family: 'rule' | 'endpoint' | 'planner' | 'olp' | 'state' | 'machine_config' | 'profile';
  text: string;
  /** HTTP status the statement documents (planner and OLP error rows, WebSocket pre-upgrade failures). */
  http?: number;
}

export type CatalogueEntry =
  | ReasonEntry
  | FormatReasonEntry
  | DenseErrorEntry
  | CapabilityEntry
  | EventEntry
  | TransitionEntry
  | LimitEntry
  | FieldEntry
  | LayoutEntry
  | RuleEntry;

export type Family = CatalogueEntry['family'];
