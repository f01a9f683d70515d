// Loaded in the unit project (vitest.config.ts setupFiles). allure-vitest's reporter adds its own setup
// to every project, whose matcher wrapper turns a failing assertion's `expected` and `actual` into JSON
// with a plain JSON.stringify (allure-js-commons sdk serialize): on a bigint that throws, and the test
// is reported "broken" with "Do not know how to serialize a BigInt" instead of its assertion (how a stray
// allure-results/ file once reached the repository). The conformance project gives every bigint a JSON
// form (harness/bigint-json.ts); the unit project runs the reference system in process, where a stray
// JSON.stringify of a bigint must still throw, so here only allure's serializer gets one: the same
// decimal digits with the `n` suffix, as vitest prints them.

if (!Object.prototype.hasOwnProperty.call(BigInt.prototype, 'toJSON')) {
  Object.defineProperty(BigInt.prototype, 'toJSON', {
    // Anyone else gets the bigint back, so JSON.stringify behaves as without toJSON: a replacer still sees
    // the bigint, and with none the engine throws its own TypeError.
    value(this: bigint): string | bigint {
      return new Error().stack?.includes('allure-js-commons') ? `${this.toString()}n` : this.valueOf();
    },
    configurable: true,
    writable: true,
  });
}

export {};
