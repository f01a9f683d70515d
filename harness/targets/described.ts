// The Describe a file's tests see, kept current on targets that start a stack per test.
//
// The `description` fixture is file-scoped: on a plain run one stack serves the whole file, so one Describe
// read at the start holds for every test. A recorded run and the replay target start a fresh stack for
// every test (harness/targets/recorder.ts), and a fresh stack has fresh incarnations (daemon and adapter):
// a test comparing the incarnations of its events or telemetry with the Describe it was given would compare
// them with the first test's stack. So the per-test fixture, once the test's stack is up, describes it
// again and updates the object the file's tests hold in place (same object, current fields).

import { HarnessError } from '../errors.ts';

interface Describable {
  client(): { describe(): Promise<{ status: number; reply: { data?: unknown; error?: unknown }; label?: unknown }> };
}

const described = new Map<object, Record<string, unknown>>();

/** The description fixture: `d` is what the file's tests hold for `target`. */
export function rememberDescription(target: object, d: Record<string, unknown>): void {
  described.set(target, d);
}
export function forgetDescription(target: object): void {
  described.delete(target);
}

/** Replace every field of `held` by those of `fresh`, keeping the object (tests hold a reference to it). */
export function replaceInPlace(held: Record<string, unknown>, fresh: Record<string, unknown>): void {
  for (const k of Object.keys(held)) if (!(k in fresh)) delete held[k];
  Object.assign(held, fresh);
}

/** After a per-test stack started: describe each of `targets` whose description a file holds, in place. */
export async function refreshDescriptions(targets: readonly object[]): Promise<void> {
  for (const t of targets) {
    const held = described.get(t);
    if (!held) continue; // the file has not described it yet: the fixture will, from this very stack
    const r = await (t as Describable).client().describe();
    if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `describe answered ${r.status} ${String(r.reply.error)}`, { detail: { status: r.status, label: String(r.label) } });
    replaceInPlace(held, r.reply.data as Record<string, unknown>);
  }
}
