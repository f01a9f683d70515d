// Plain-code checks over many values (every record of a batch, every cycle of an execution), reported with
// one expect: thousands of expects are slow, and their time is the harness's thread's, which the test's own
// timing checks share (and a rig's bench box heartbeat did, before it had a thread of its own:
// docs/benchbox.md). Each problem names what broke (the record, the value, the bound).

/** The problems found so far (the first 20) and the check that adds one when `ok` is false. */
export function problems(): { add: (ok: boolean, what: string) => void; list: string[] } {
  const list: string[] = [];
  return { list, add: (ok, what) => void (ok || list.length >= 20 || list.push(what)) };
}
