// A target that is one service shared by the whole run (external, rig): one grant for every test. The run
// gives such a target one test at a time (vitest.config.ts), and after each test the target ends every
// grant that test's clients were given and did not see end, so that a test that failed holding the grant
// does not make the next one meet control_already_owned (document 1 part 4: a client that does not know
// an outcome stops and reconciles; an unattended cell stops when its lease runs out).

import { DRAIN_MS, draining, leaveSession } from '../clients/cell.ts';
import { waitStatus } from '../clients/status.ts';
import { ControlClient, SessionLedger } from '../clients/control.ts';
import { HarnessError } from '../errors.ts';
import type { TargetName } from './types.ts';

/**
 * Targets that are one service for the whole run: their descriptors' abilities.sharedService, named here too
 * so that vitest.config.ts can choose its pool without loading every target; the registry (index.ts) refuses
 * a descriptor that disagrees with this list.
 */
export const SHARED_TARGETS: readonly TargetName[] = ['external', 'rig'];

export const isShared = (name: string): boolean => (SHARED_TARGETS as readonly string[]).includes(name);

/** The clients of a shared target: each notes its grants in one ledger the target reconciles. */
export class SharedClients {
  readonly ledger = new SessionLedger();
  private clients: ControlClient[] = [];

  constructor(private readonly make: () => ControlClient) {}

  client(): ControlClient {
    const c = this.make();
    c.ledger = this.ledger;
    this.clients.push(c);
    return c;
  }

  /**
   * End every grant noted since the last call: release, or stop and release. A grant whose end cannot be
   * confirmed is left to its lease: wait that long (plus a margin for the service's own check), so the
   * next test finds the grant idle. Returns how many grants were ended here.
   */
  async reconcile(sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms))): Promise<number> {
    const open = this.ledger.take();
    if (open.length === 0) return 0;
    const c = this.make();
    try {
      let ended = 0;
      let wait = 0;
      let stopped = false;
      for (const s of open) {
        if (await leaveSession(c, s, () => (stopped = true))) ended++;
        else wait = Math.max(wait, s.lease_ms);
      }
      // A stop's drain ends before the next test acquires (document 1 part 3: an acquire needs "no Stop
      // draining"), as Cell.cleanup waits for it (harness/clients/cell.ts).
      if (stopped) await waitStatus(c, (x) => !draining(x), DRAIN_MS).catch(() => undefined);
      if (wait > 0) {
        if (wait > 120_000) throw new HarnessError('HIL_ERR_TARGET_NOT_SETTLED', `a grant left by the test could not be ended and its lease is ${wait} ms`);
        await sleep(wait + 250);
      }
      return ended;
    } finally {
      await c.close();
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((c) => c.close()));
  }
}
