// Matching a target's reply against the outcomes the model allows (status, leading label, the outcome's
// own checks), and the text a mismatch prints.

import type { CheckedReply } from '../oracle/reply.ts';
import { big, type Outcome } from './state.ts';

export function matches(o: Outcome, r: CheckedReply): string | undefined {
  if (o.replay) {
    const a = JSON.stringify(o.replay.reply, big);
    const b = JSON.stringify(r.reply, big);
    if (r.status !== o.replay.status || a !== b) return `expected the remembered reply ${o.replay.status} ${a}, got ${r.status} ${b}`;
    return undefined;
  }
  if (r.status !== o.status) return `status ${r.status} ${r.label ?? ''}, expected ${o.status}${o.labels ? ` ${o.labels.join('|')}` : ''}`;
  if (o.status === 409 && o.labels && !o.labels.includes(r.label ?? '')) return `label ${r.label}, expected ${o.labels.join('|')}`;
  return o.check?.(r);
}


export function describeOutcome(o: Outcome): string {
  if (o.replay) return `replay of ${o.replay.status} ${o.replay.label ?? ''} (${o.rule})`;
  return `${o.status}${o.labels ? ` ${o.labels.join('|')}` : ''} (${o.rule})`;
}
