import { expect, test } from 'vitest';
import { decodeStatusword } from '../../drivers/ds402.ts';
import { stateOf } from './ds402-state.ts';

test('stateOf agrees with decodeStatusword for every statusword', () => {
  let differ = 0;
  for (let sw = 0; sw < 0x10000; sw++) if (stateOf(sw) !== decodeStatusword(sw)) differ++;
  expect(differ).toBe(0);
  // and it is not trivially constant: each of the eight states occurs
  expect(new Set(Array.from({ length: 128 }, (_, sw) => stateOf(sw))).size).toBe(8);
});
