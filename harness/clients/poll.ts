// The pause a client's poll loop takes between two reads (waitStatus, waitForEvent).
//
// On the replay target a status read is a sync point: the replayed core is held where the recorded read
// arrived, and read k is served what recorded read k was served (docs/recording.md "Faster than recorded").
// So a polling test makes as many reads as it made when recorded whatever it sleeps between them, and the
// sleep only costs wall time: there it is 1 ms. Event polls are no sync point; the core they wait for runs
// flat out to the next one, so a shorter pause finds the event as soon. Everywhere else the pause is the
// caller's: a live target is not polled harder than the suites always have.

/** Sleep `ms` between two polls (1 ms on the replay target, `HIL_TARGET=replay`). */
export function pollPause(ms: number, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const pause = env.HIL_TARGET === 'replay' ? Math.min(ms, 1) : ms;
  return new Promise((resolve) => setTimeout(resolve, pause));
}
