// The core's per-cycle statusword decoding: decodeStatusword (drivers/ds402.ts) as a 128-entry table.
// Every CiA 402 state pattern masks only bits 0..6 of the statusword (0x4f or 0x6f), so the state of a
// statusword is the state of its low seven bits; the table is built from decodeStatusword itself, and
// ds402-state.test.ts checks it against decodeStatusword for all 65536 statuswords.

import { decodeStatusword, type Ds402State } from '../../drivers/ds402.ts';

const TABLE = new Uint8Array(128);
for (let sw = 0; sw < 128; sw++) TABLE[sw] = decodeStatusword(sw);

/** decodeStatusword(sw), by table lookup (allocates nothing, no loop). */
export function stateOf(sw: number): Ds402State {
  return TABLE[sw & 0x7f] as Ds402State;
}
