// The one error type of the oracle. Tests assert `code` (stable, snake_case), never `message`
// (the undici/ws habit described in DESIGN.md). The oracle decodes only what the target sent, so an
// OracleError is the target's fault: a HarnessError whose verdict is always `fail` (harness/errors.ts).

import { HarnessError } from '../errors.ts';

export type OracleDetail = Readonly<Record<string, string | number | bigint | boolean | undefined>>;

export class OracleError extends HarnessError {
  override readonly name: string = 'OracleError';
  /** Structured evidence (segment, sample, axis, field, offset, both digests ...), never needed to match. */
  declare readonly detail: OracleDetail;

  constructor(code: string, message: string, detail: OracleDetail = {}, options?: { cause?: unknown }) {
    super('HIL_ERR_TARGET_MALFORMED', message, { cause: options?.cause, detail });
    this.recode(code, message);
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
