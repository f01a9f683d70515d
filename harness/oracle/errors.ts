// The one error type of the oracle. Tests assert `code` (stable, snake_case), never `message`
// (the undici/ws habit described in DESIGN.md).

export type OracleDetail = Readonly<Record<string, string | number | bigint | boolean | undefined>>;

export class OracleError extends Error {
  override readonly name = 'OracleError';
  readonly code: string;
  /** Structured evidence (segment, sample, axis, field, offset, both digests ...), never needed to match. */
  readonly detail: OracleDetail;

  constructor(code: string, message: string, detail: OracleDetail = {}, options?: { cause?: unknown }) {
    super(`${code}: ${message}`, options);
    this.code = code;
    this.detail = detail;
  }
}

export function fail(code: string, message: string, detail?: OracleDetail, cause?: unknown): never {
  throw new OracleError(code, message, detail, cause === undefined ? undefined : { cause });
}

export function isOracleError(e: unknown, code?: string): e is OracleError {
  return e instanceof OracleError && (code === undefined || e.code === code);
}

/** The OracleError code a call throws, or 'no error' (tests assert codes, never messages). */
export function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof OracleError) return e.code;
    throw e;
  }
  return 'no error';
}
