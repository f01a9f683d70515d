import { expect, test } from 'vitest';
import fc from 'fast-check';
import { CycleHistogram } from './histogram.ts';

test('the last-bucket shortcut puts every sample in the bucket the log10 path chooses', () => {
  const sample = fc.oneof(
    fc.double({ min: -10, max: 2e8, noNaN: false }),
    fc.constantFrom(...Array.from(CycleHistogram.EDGES), 999.9999999, 0, -0, Infinity, NaN),
    fc.integer({ min: 900, max: 3_000 }),
  );
  fc.assert(
    fc.property(fc.array(sample, { maxLength: 60 }), (xs) => {
      const h = new CycleHistogram();
      const expected = new Float64Array(102);
      for (const x of xs) {
        h.record(x);
        const one = new CycleHistogram(); // no previous sample: always the log10 path
        one.record(x);
        for (let k = 0; k < 102; k++) expected[k]! += one.counts[k]!;
      }
      expect(Array.from(h.counts)).toEqual(Array.from(expected));
    }),
    { numRuns: 500 },
  );
});
