// The harness's one error class. Every throw of the harness carries a stable string `code` (the undici
// habit: tests and tools match codes, never messages), and the code decides what a test that ends with
// it means (the OpenHTF habit):
//
//   fail   the target broke a rule: it refused what it must answer, sent bytes the documents do not
//          allow, or dropped a connection it had accepted. A verdict on the system under test.
//   error  the harness or the environment broke: the stack could not be started, an option is missing,
//          a suite asked for something without checking, the private test channel refused. Not a verdict
//          on the system under test.
//
// The reporter runs in another process than the tests, so it sees errors serialized: `code` and
// `verdict` are own enumerable fields that survive serialization, and `verdictOfError` accepts either
// the instance or its serialized form.

export type ErrorVerdict = 'fail' | 'error';

/** Every harness code with the verdict a test ending in it gets. Codes are stable; add, never rename. */
export const HARNESS_CODES = {
  // Targets (harness/targets/)
  HIL_ERR_TARGET_START: 'error', // the stack did not start or no control socket at the given path
  HIL_ERR_TARGET_OPTION: 'error', // a required target option is missing or malformed
  HIL_ERR_TARGET_UNKNOWN: 'error', // HIL_TARGET names no target
  HIL_ERR_TARGET_DESCRIPTOR: 'error', // a target descriptor is malformed (harness bug)
  HIL_ERR_TARGET_NO_ABILITY: 'error', // a suite used an ability without checking target.abilities first
  HIL_ERR_VARIANT_INVALID: 'error', // malformed variant options (a suite bug, said loudly)
  HIL_ERR_VARIANT_UNSUPPORTED: 'error', // this target cannot provide the variant (the fixture turns it into a skip)
  HIL_ERR_TEST_CHANNEL: 'error', // the reference stack's private test channel refused (harness side)
  HIL_ERR_TARGET_UNSUPPORTED: 'error', // the target cannot do this at all (a replay cannot restart its core)
  HIL_ERR_TARGET_NOT_SETTLED: 'error', // a shared target could not be brought back to idle after a test (harness/targets/shared.ts)
  HIL_ERR_BENCH_BOX: 'error', // a rig's bench box opened the E-stop chain although the harness kept its heartbeat (harness/targets/rig.ts)
  // Recorded replay (harness/targets/recorder.ts, docs/recording.md)
  HIL_ERR_REPLAY_MISSING: 'error', // no recordings directory, or no recording where one was required
  HIL_ERR_REPLAY_STALE: 'error', // the recording was made for another machine digest (both named): re-record
  HIL_ERR_REPLAY_NO_VERDICT: 'error', // the replay stack wrote no verdict (it did not start or was killed)
  HIL_ERR_REPLAY_VERDICT_INVALID: 'error', // the replay stack's verdict file does not match fixtures/contract/replay-verdict.schema.json (or the stack refused its own)
  HIL_ERR_REPLAY_DIVERGED: 'fail', // the replayed run differed from the recording (request, reply, event or bus)
  HIL_ERR_REPLAY_UNHELD: 'error', // the replay could not hold a recorded order (a sync point waited for in vain): the test says nothing about the target
  // Clients (harness/clients/): what the target did
  HIL_ERR_TRANSPORT: 'fail', // the target dropped, reset or never answered a request on a connection it accepted
  HIL_ERR_TARGET_REFUSED: 'fail', // the target refused a request the documents say it must answer here
  HIL_ERR_TARGET_MALFORMED: 'fail', // the target sent a reply, stream or output the documents do not allow
  HIL_ERR_TOOL_FAILED: 'error', // a harness-side tool process (not the system under test) could not run
  HIL_ERR_HOST_TOO_SLOW: 'error', // the harness's host missed a timing window a check needs (its own sends came too late), on every attempt
  // Catalogue and traceability (harness/catalogue/, harness/trace.ts): the harness's own data
  HIL_ERR_CATALOGUE: 'error', // the catalogue is malformed or has no such id
  HIL_ERR_TRACE: 'error', // covers()/profile() used without ids
  HIL_ERR_PROFILE_CHECK: 'error', // a profile check (inProfile) on another team's target could not complete (the connection dropped): neither a difference nor a verdict
  // Measurements (harness/measure.ts)
  HIL_ERR_MEASUREMENT_LIMIT: 'fail', // a measured value is outside its documented or configured limit (both numbers named)
  HIL_ERR_MEASUREMENT: 'error', // a measurement declared or recorded wrongly (a suite bug)
} as const satisfies Record<string, ErrorVerdict>;

export type HarnessCode = keyof typeof HARNESS_CODES;

export type ErrorDetail = Readonly<Record<string, string | number | bigint | boolean | undefined>>;

export class HarnessError extends Error {
  override readonly name: string = 'HarnessError';
  /** Stable code: a HarnessCode, or an oracle code (snake_case) for an OracleError. */
  readonly code: string;
  /** What a test that ends with this error means: fail (the target) or error (the harness/environment). */
  readonly verdict: ErrorVerdict;
  /** Structured evidence, never needed to match. */
  readonly detail: ErrorDetail;

  constructor(code: HarnessCode, message: string, options: { cause?: unknown; detail?: ErrorDetail } = {}) {
    super(`${code}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.verdict = HARNESS_CODES[code];
    this.detail = options.detail ?? {};
  }

  /** For subclasses with their own code vocabulary (the oracle's), keeping the verdict their class implies. */
  protected recode(code: string, message: string): void {
    (this as { code: string }).code = code;
    this.message = `${code}: ${message}`;
  }
}

export function isHarnessError(e: unknown, code?: string): e is HarnessError {
  return e instanceof HarnessError && (code === undefined || e.code === code);
}

/** The HarnessError code an async call rejects with, or 'no error' (tests assert codes, never messages). */
export async function codeOfAsync(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof HarnessError) return e.code;
    throw e;
  }
  return 'no error';
}

/** An error as the reporter sees it: an instance in the same process, or vitest's serialized copy. */
export interface ErrorLike {
  name?: string;
  message?: string;
  code?: unknown;
  verdict?: unknown;
  actual?: unknown;
  expected?: unknown;
  showDiff?: unknown;
  cause?: unknown;
}

/**
 * FAIL or ERROR for one error that ended a test.
 * - a HarnessError (or its serialized copy, recognised by a known code or its verdict field): its verdict;
 * - an expectation that did not hold (vitest/chai assertion, recognised by its diff fields): fail;
 * - an error that wraps another as its `cause` (fast-check's "Property failed" wraps the failing case's
 *   error): the verdict of what it wraps;
 * - anything else (a TypeError in a suite, a test timeout, an unknown throw): error, because nothing
 *   says the target broke a rule, and a qualification report must not blame the device for it.
 */
export function verdictOfError(e: ErrorLike | unknown, depth = 0): ErrorVerdict {
  if (e instanceof HarnessError) return e.verdict;
  if (e === null || typeof e !== 'object') return 'error';
  const x = e as ErrorLike;
  if (typeof x.code === 'string' && Object.hasOwn(HARNESS_CODES, x.code)) return HARNESS_CODES[x.code as HarnessCode];
  if (x.verdict === 'fail' || x.verdict === 'error') return x.verdict;
  if (isAssertion(x)) return 'fail';
  if (x.cause !== undefined && x.cause !== e && depth < 8) return verdictOfError(x.cause, depth + 1);
  return 'error';
}

/** An expectation that did not hold (vitest's expect, chai's assert), never a HarnessError. */
export function isAssertionError(e: unknown): boolean {
  if (e instanceof HarnessError || e === null || typeof e !== 'object') return false;
  return isAssertion(e as ErrorLike) || (e as ErrorLike).name === 'AssertionError';
}

/** vitest's expect and chai's assert throw errors carrying `showDiff` and usually `actual`/`expected`. */
function isAssertion(x: ErrorLike): boolean {
  return typeof x.showDiff === 'boolean' || ('actual' in x && 'expected' in x);
}

const TRANSPORT_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH']);

/**
 * A client's transport failure as the harness reports it: undici's own errors (`UND_ERR_*`) and socket
 * errnos become HIL_ERR_TRANSPORT (the target did not answer on a connection it had accepted: a fail),
 * keeping the original as `cause` and its code in `detail.cause_code`. Anything else passes unchanged.
 */
export function asTransportError(e: unknown, what: string): unknown {
  if (e instanceof HarnessError || e === null || typeof e !== 'object') return e;
  const code = (e as { code?: unknown }).code;
  if (typeof code !== 'string' || !(code.startsWith('UND_ERR') || TRANSPORT_ERRNO.has(code))) return e;
  if (code === 'UND_ERR_ABORTED') return e; // the caller aborted on purpose
  return new HarnessError('HIL_ERR_TRANSPORT', `${what}: ${(e as Error).message}`, { cause: e, detail: { cause_code: code } });
}
