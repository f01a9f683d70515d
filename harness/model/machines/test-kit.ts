// Shared by the state machines' unit tests (harness/model/machines/*.test.ts): a small cell, a grant held
// at generation 5, and a request as the runner would resolve it. The model alone, no target.

import { REFERENCE_RULES, outcomes, type ModelConfig, type ModelState, type Request, type Rules, type Spec } from '../model.ts';
import { initialState } from '../state.ts';

export const S = 'a1'.repeat(32);

/** Three native-home axes, the plan on axis 0, output 1 plain and output 0 a torch, 1 ms cycles. */
export const config = (rules: Rules = REFERENCE_RULES): ModelConfig => ({ axisCount: 3, nativeHomeMask: 0b111, trajAxis: 0, leaseCeilingMs: 500, defaultLeaseMs: 500, cycleNs: 1_000_000n, plainOutput: 1, torchOutput: 0, outputCount: 3, planCycles: 400, jogInputAgeMs: 250, rules });

/** A grant of session S held at `generation`, axis 0 homed, nothing enabled or armed. */
export function owned(generation = 5n): ModelState {
  const m = initialState({ baseHandle: 0n, homeMask: 1, lastGeneration: generation });
  m.grant = { session: S, generation, acquired: generation, stopping: false, leaseMs: 500, controller: 'c', lease: { lo: 0, hi: 0 }, cache: new Map() };
  return m;
}

/** The grant armed with every axis enabled and a prepared handle 1 on axis 0. */
export function ready(): ModelState {
  const m = owned();
  m.armed = true;
  m.enableMask = 0b111;
  m.maxHandle = 1n;
  m.handles.set('1', { n: 1n, state: 'prepared', core: 0, session: S, ioOn: false, epoch: 0, bit: 1 });
  return m;
}

export const req = (spec: Spec, generation = 5n, extra: Partial<NonNullable<Request['resolved']>> = {}): Request => ({ spec, payload: JSON.stringify(spec), resolved: { session: S, generation, ...extra } });

/** The outcomes as status or leading labels (what a reply may be), the lease surely alive. */
export const labels = (c: ModelConfig, m: ModelState, r: Request, t = { sendMs: 0, recvMs: 0 }): Array<200 | string> => outcomes(c, m, r, 'alive', 0n, t).map((o) => (o.status === 200 ? 200 : o.labels!.join('|')));

/** Apply the first outcome to `m` with a reply of its status (and the given reply fields). */
export function apply(c: ModelConfig, m: ModelState, r: Request, reply: Record<string, unknown> = {}, t = { sendMs: 0, recvMs: 0 }): void {
  const o = outcomes(c, m, r, 'alive', 0n, t)[0]!;
  o.next?.(m, { status: o.status, label: o.labels?.[0], reply: { schema: 'svc.rt-control.response.v1', operation: r.spec.op, ...reply } } as never);
}
