// Compile refusals of the machine configuration (document 3 part 2). Tests assert on `code` and `path`,
// never on the message text.

export type ConfigErrorCode =
  | 'config_syntax' // not strict JSON (trailing data, comments, bad escapes, nesting too deep)
  | 'config_duplicate_field' // a key repeated inside one object
  | 'config_unknown_field' // a key the schema does not know in that place
  | 'config_missing_field' // a required field is absent
  | 'config_forbidden_field' // a known field present where its form forbids it
  | 'config_type' // wrong JSON type, or a fraction/exponent where an exact integer is required
  | 'config_range' // outside its documented range or enumeration, or a cross-field bound (min < max, DC quantum)
  | 'config_duplicate_value' // a value that must be unique (slave_position, axis id, I/O name) repeats
  | 'config_inconsistent' // two fields that describe the same fact disagree (gear_ratio vs wire_revs_per_axis_rev)
  | 'config_reference' // names something that does not exist (drive profile, robot joint)
  | 'config_provenance_missing' // numeric robot fact without `<field>_source` or `<field>_unverified`
  | 'config_resource' // referenced resource unreadable, too large, badly named, or digest mismatch
  | 'config_directory_conflict'; // compiled directory exists with different content

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly code: ConfigErrorCode,
    /** Field path such as `axes[3].limits.max_velocity`; empty for the document itself. */
    readonly path: string,
    detail: string,
  ) {
    super(`${code}${path ? ` at ${path}` : ''}: ${detail}`);
  }
}
