// A controller's view of the cell: acquire a grant, send fenced commands, and always leave the cell
// stopped and released. On any unknown outcome it stops the grant and reconciles from status, as
// document 1 part 4 asks of every client.

import { HarnessError } from '../errors.ts';
import { checkGrant, type CheckedReply, type Grant } from '../oracle/reply.ts';
import { REQUEST_SCHEMA, type BindingInput, type ControlClient } from './control.ts';
import { epochNow, keepGrant, type GrantLoss, type KeptGrant } from './keeper.ts';

export interface Session {
  session: string;
  generation: bigint;
  grant: Grant;
}

export class Cell {
  private held: Session[] = [];
  private keepers: KeptGrant[] = [];
  private finished: KeptGrant[] = [];
  private counter = 0;

  constructor(
    readonly client: ControlClient,
    readonly binding: BindingInput,
  ) {}

  /** acquire with the configured binding unless overridden; returns the checked reply. */
  acquire(fields: Record<string, unknown> = {}): Promise<CheckedReply> {
    return this.client
      .control({ schema: REQUEST_SCHEMA, operation: 'acquire', controller: `hil-${process.pid}-${++this.counter}`, binding: this.binding, ...fields }, 'acquire')
      .then((r) => {
        if (r.status === 200) {
          const g = checkGrant(r.reply.data);
          this.held.push({ session: g.session, generation: g.generation, grant: g });
        }
        return r;
      });
  }

  /** acquire and insist on success. */
  async grant(fields: Record<string, unknown> = {}): Promise<Session> {
    const r = await this.acquire(fields);
    if (r.status !== 200) throw new HarnessError('HIL_ERR_TARGET_REFUSED', `acquire refused: ${r.status} ${r.reply.error}`, { detail: { status: r.status, label: r.label } });
    const g = checkGrant(r.reply.data);
    return this.held.find((s) => s.session === g.session)!;
  }

  /**
   * acquire and keep the lease alive with renewals every fifth of lease_ms, as a controller does while it
   * works; the renewals go from the grant keeper's own thread (harness/clients/keeper.ts), so a busy test
   * loop cannot let the lease run out, and stop at cleanup or when a renewal is refused.
   */
  async hold(fields: Record<string, unknown> = {}): Promise<Session> {
    const startSent = epochNow();
    const s = await this.grant(fields);
    // A fifth of the lease: a renewal may be late by most of the lease on a loaded machine and still arrive.
    const every = Math.max(20, Math.floor(s.grant.lease_ms / 5));
    this.keepers.push(keepGrant(this.client, s, s.grant.lease_ms, every, startSent));
    return s;
  }

  /**
   * A held grant the keeper lost (a renewal refused `expired`), with whose doing it was (harness/clients/keeper.ts):
   * the host's first, since it makes what failed after it say nothing about the target.
   */
  grantLoss(): GrantLoss | undefined {
    const losses = [...this.finished, ...this.keepers].map((k) => k.loss()).filter((l): l is GrantLoss => l !== undefined);
    return losses.find((l) => !l.target) ?? losses[0];
  }

  /** A fenced operation with the session's fence (overridable through fields). */
  fenced(op: string, s: Pick<Session, 'session' | 'generation'>, fields: Record<string, unknown> = {}): Promise<CheckedReply> {
    return this.client.control({ schema: REQUEST_SCHEMA, operation: op, session: s.session, generation: s.generation, ...fields }, op);
  }

  /** Release or stop everything this cell acquired; never throws (cleanup must not mask the test result). */
  async cleanup(): Promise<void> {
    for (const k of this.keepers.splice(0)) {
      k.stop();
      this.finished.push(k);
    }
    for (const s of this.held.splice(0)) await leaveSession(this.client, s);
  }
}

/**
 * Release a session's grant, or stop it and release the generation the stop answered (a renewal or a
 * stop may have moved the generation on); true when the grant is known to have ended. Never throws: an
 * unknown outcome leaves only reconciliation at the next acquire, or the lease running out.
 */
export async function leaveSession(client: ControlClient, s: Pick<Session, 'session' | 'generation'>): Promise<boolean> {
  const fenced = (op: string, generation: bigint) => client.control({ schema: REQUEST_SCHEMA, operation: op, session: s.session, generation }, op);
  try {
    const r = await fenced('release', s.generation);
    // expired: the lease ran out, so the grant has ended (document 1 part 4, release and stop reasons).
    if (r.status === 200 || r.label === 'expired') return true;
    const st = await fenced('stop', s.generation);
    if (st.label === 'expired') return true;
    if (st.status !== 200) return false;
    const g = checkGrant(st.reply.data);
    return (await fenced('release', g.generation)).status === 200;
  } catch {
    return false;
  }
}
