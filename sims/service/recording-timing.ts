// The service's timing on a recorded run (`hil serve --record`; docs/recording.md "The service side"): the
// live service's (timing.ts LiveTiming: host clock, every decision taken at once, nothing held), and each
// decision a replay retakes noted into the recording through the core link, where the core host writes it
// among the requests as a service note. Picked by the composition root (sims/main.ts); the service's parts
// only see the port (timing.ts DecisionLog).

import { LiveTiming, replyNote, statusReadNote, UNORDERED, type CoreWait, type DecisionLog, type Takens, type TimingLink } from './timing.ts';

export class RecordingTiming extends LiveTiming implements DecisionLog {
  private link?: TimingLink;

  override attach(link: TimingLink): void {
    this.link = link;
  }

  override took<K extends keyof Takens>(k: K, ...facts: Takens[K]): void {
    const link = this.link;
    if (!link) return;
    const f = facts as unknown[];
    switch (k) {
      case 'fence': {
        const [op, outcome, seen] = f as Takens['fence'];
        // Renewals and jog updates come at the client's wall-clock pace: a replay neither orders nor holds them.
        if (!UNORDERED.has(op)) link.note({ t: 'fence', op, outcome, ...(seen !== undefined ? { seen } : {}) });
        return;
      }
      case 'commit':
        return link.note({ t: 'commit', op: f[0] });
      case 'status_read': {
        const [cycle, nowNs] = f as Takens['status_read'];
        return link.note(statusReadNote(cycle, nowNs, link.outputsSeen));
      }
      case 'telemetry_read':
        return link.note({ t: 'telemetry_read' });
      case 'http_reply': {
        const note = replyNote((f as Takens['http_reply'])[0]);
        if (note) link.note(note);
        return;
      }
      case 'watch':
        return link.note({ t: 'watch', stream: f[0], open: f[1] });
    }
  }

  override wait(kind: string | null, _ms: number): CoreWait {
    if (kind === null) return super.wait(null, 0);
    // A status wait notes the publication it got: a replay ends the wait with that one (CoreWait.atLeast).
    return { done: (outcome, cycle) => this.link?.note({ t: 'core_wait', kind, outcome, ...(cycle !== undefined ? { cycle: cycle.toString() } : {}) }) };
  }
}
