// What a client of a stack on the stepped clock does over and over: step the core until an operation's
// reply comes (the core answers in a cycle, and a Home or an arm takes many), and bring the cell to a held
// grant with J1 homed and every axis enabled and armed. The cycles run only when asked (target.step, the
// private test channel), so these never wait on the wall clock.

import type { Cell, Session } from './cell.ts';
import type { ControlClient } from './control.ts';
import { readStatus } from './status.ts';
import { HarnessError } from '../errors.ts';
import type { Target } from '../targets/types.ts';

function stepper(target: Target): (cycles: number) => Promise<bigint> {
  if (!target.step) throw new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', `target ${target.name} has no stepped clock`);
  return (n) => target.step!(n);
}

/** Step the core `chunk` cycles at a time until `p` settles (at most 1000 chunks); its outcome. */
export async function settle<T>(target: Target, p: Promise<T>, chunk = 10): Promise<T> {
  const step = stepper(target);
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 1000 && !done; i++) await step(chunk);
  return p;
}

/**
 * A held grant (renewed in host time), the axes of `homeMask` homed when they have no Home evidence,
 * every axis enabled and armed; the positions then held. Throws a HarnessError naming the step that was
 * refused (a target that refuses these cannot run the test that asked).
 */
export async function readyStepped(
  target: Target,
  cell: Cell,
  client: ControlClient,
  o: { axes: number; homeMask?: number; leaseMs?: number },
): Promise<{ s: Session; hold: number[] }> {
  const step = stepper(target);
  await step(20); // the core's first status publications
  const s = await cell.hold({ requested_lease_ms: BigInt(o.leaseMs ?? 10_000) });
  const must = (what: string, r: { status: number; reply: { error?: string } }) => {
    if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `${what} refused: ${r.status} ${r.reply.error ?? ''}`, { detail: { status: r.status } });
  };
  const home = o.homeMask ?? 1;
  const st = await readStatus(client);
  if (home && (Number(st.core!.home_valid_mask) & home) !== home) must('home', await settle(target, cell.fenced('home', s, { axis_mask: home }), 20));
  const all = o.axes >= 32 ? 0xffffffff : (1 << o.axes) - 1;
  must('enable', await settle(target, cell.fenced('enable', s, { axis_mask: all }), 5));
  must('arm', await settle(target, cell.fenced('arm', s), 5));
  await step(20); // a status publication after the arm
  const x = await readStatus(client);
  if (Number(x.core!.axis_enable_mask) !== all) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `armed, but axis_enable_mask is ${x.core!.axis_enable_mask}, not ${all}`);
  return { s, hold: x.axes.map((a) => Number(a.position)) };
}
