// The binding a client acquires with (document 1 part 2 "Binding": pair_id and revision equal to the
// configured ones, configuration_sha256 the configured digest). Document 1 names no place a client reads
// the configured pair id and revision from, and Describe's field list is "not shown": the reference stack
// reports its binding in Describe (docs/profile.md "Describe and Status fields"), someone else's service
// may not. The suites take it from Describe when it is there, else from what the run was told
// (`--pair-id`, `--pair-revision` on the external target) with the digests Describe does report
// (part 2 "Observation types": machine_sha256, configuration_sha256). A binding the run supplied is marked,
// so that a test of what Describe itself reports can tell.

import { HarnessError } from '../errors.ts';
import { targetFromEnv } from './index.ts';

export interface BindingFields {
  pair_id: string;
  revision: bigint;
  configuration_sha256: string;
  machine_sha256?: string;
}

const supplied = new WeakSet<object>();

const isBinding = (b: unknown): b is BindingFields => typeof b === 'object' && b !== null && typeof (b as BindingFields).pair_id === 'string' && typeof (b as BindingFields).revision === 'bigint';

/**
 * The Describe data `d` with a binding: its own when it reports one, else the run's pair id and revision
 * with Describe's digests (the same object, given a `binding`). A HarnessError (the run's, not the
 * target's) when it reports none and the run names none.
 */
export function withBinding<D extends Record<string, unknown>>(d: D, env: NodeJS.ProcessEnv = process.env): D & { binding: BindingFields } {
  if (isBinding(d.binding)) return d as D & { binding: BindingFields };
  const o = targetFromEnv(env).options as { pairId?: string; pairRevision?: string };
  if (o.pairId === undefined || o.pairRevision === undefined) {
    throw new HarnessError(
      'HIL_ERR_TARGET_OPTION',
      'Describe reports no binding (its field list is not shown, document 1 part 2) and the run names none: give --pair-id ID and --pair-revision N, the pair id and revision the service is configured with',
    );
  }
  if (typeof d.configuration_sha256 !== 'string') throw new HarnessError('HIL_ERR_TARGET_OPTION', 'Describe reports no binding and no configuration_sha256 (document 1 part 2 "Observation types") to acquire with');
  const binding: BindingFields = {
    pair_id: o.pairId,
    revision: BigInt(o.pairRevision),
    configuration_sha256: d.configuration_sha256,
    ...(typeof d.machine_sha256 === 'string' ? { machine_sha256: d.machine_sha256 } : {}),
  };
  const out = Object.assign(d, { binding });
  supplied.add(out);
  return out;
}

/** Whether Describe itself reported the binding of `d` (false: the run supplied it, withBinding). */
export function describedBinding(d: object): boolean {
  return !supplied.has(d);
}
