// Planning child process: one per admitted request (document 2 part 1). Reads the weldplan from a file,
// prints progress lines and one final line as JSON on stdout, writes the dense file (if any) to a temporary path.
import { readFileSync, writeFileSync } from "node:fs";
import { PlanFailure, plan, type PlanOptions } from "./plan.js";

const [bodyFile, optionsJson, denseTmp] = process.argv.slice(2);
const say = (o: unknown): void => { process.stdout.write(JSON.stringify(o) + "\n"); };
try {
  const delay = Number(process.env.BLIND_PLANNER_TEST_DELAY_MS ?? 0); // test hook: a slow plan, to exercise queueing and cancel
  if (delay > 0) { say({ stage: "sweep" }); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, delay); }
  const out = plan(readFileSync(bodyFile), JSON.parse(optionsJson) as PlanOptions, (stage) => say({ stage }));
  if (out.dense) writeFileSync(denseTmp, out.dense.blob);
  say({ result: out.result, dense_digest: out.dense?.digest ?? null });
} catch (e) {
  if (e instanceof PlanFailure) say({ failure: e.text });
  else say({ crash: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
}
