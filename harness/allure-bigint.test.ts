// A failing assertion on bigint values is reported as that assertion by the Allure results of the unit
// project too (harness/allure-bigint.ts, loaded by vitest.config.ts), while JSON.stringify of a bigint
// anywhere else still throws as it does in the reference system's own processes.

import { getMessageAndTraceFromError } from 'allure-js-commons/sdk';
import { expect, test } from 'vitest';

test("allure's error serializer gives bigints their vitest form; plain JSON.stringify of a bigint still throws", () => {
  let assertion: unknown;
  try {
    expect({ a: 'x', g: 5n }).toMatchObject({ a: 'y', g: 6n });
  } catch (e) {
    assertion = e;
  }
  expect(assertion).toMatchObject({ name: 'AssertionError' });
  const r = getMessageAndTraceFromError(assertion as Error);
  expect(r.actual).toBe('{"a":"x","g":"5n"}');
  expect(r.expected).toBe('{"a":"y","g":"6n"}');
  expect(() => JSON.stringify({ g: 5n })).toThrow(new TypeError('Do not know how to serialize a BigInt'));
  // A replacer still receives the bigint itself.
  expect(JSON.stringify({ g: 5n }, (_k, v: unknown) => (typeof v === 'bigint' ? `big:${v}` : v))).toBe('{"g":"big:5"}');
});
