// The service's strict JSON decoder (sims/json.ts decodeJson: byte state machine, exact number
// text, duplicate keys refused) against JSON.parse on the same ~50 MB prepare_trajectory body, measured
// in the same run. Prints MB/s and ratios; asserts nothing.
//
//   node --import tsx bench/strict-json.bench.ts [MB] [repetitions]
//
// Baseline: JSON.parse of the body's bytes (UTF-8 decode included, since the service receives bytes).
// Also shown: JSON.parse of an already decoded string. Each figure is the median of the repetitions.

import { decodeJson } from '../sims/json.ts';
import { makePointsBody } from './points-body.ts';

const MB = Number(process.argv[2] ?? 50);
const REPS = Number(process.argv[3] ?? 5);

const { bytes, points } = makePointsBody(MB * 1e6);
const text = bytes.toString('utf8');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

let sink: unknown;
/** Runs `f` REPS times (after one warm-up) and returns the median seconds; the previous result is dropped first. */
function time(f: () => unknown): number {
  const ts: number[] = [];
  for (let k = 0; k <= REPS; k++) {
    sink = undefined;
    const t0 = process.hrtime.bigint();
    sink = f();
    if (k > 0) ts.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  sink = undefined;
  return median(ts);
}

const parseBytes = time(() => JSON.parse(bytes.toString('utf8')));
const parseText = time(() => JSON.parse(text));
const strict = time(() => decodeJson(bytes));
void sink;

const mb = bytes.length / 1e6;
const rate = (s: number) => `${(mb / s).toFixed(1).padStart(6)} MB/s  ${(s * 1e3).toFixed(0).padStart(5)} ms`;
console.log(`body ${mb.toFixed(1)} MB, ${points} points of 9 axes; median of ${REPS} runs after one warm-up`);
console.log(`baseline JSON.parse(bytes -> utf8 string): ${rate(parseBytes)}`);
console.log(`JSON.parse(string) only:                   ${rate(parseText)}  ratio to baseline ${(parseBytes / parseText).toFixed(2)}`);
console.log(`strict decodeJson(bytes):                  ${rate(strict)}  ratio to baseline ${(parseBytes / strict).toFixed(2)}`);
console.log(`the strict decoder blocks an event loop for ${(strict * 1e3).toFixed(0)} ms on this body (decode large uploads off the main loop)`);
