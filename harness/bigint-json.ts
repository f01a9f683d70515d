// Loaded in every conformance worker (vitest.config.ts setupFiles). allure-vitest's runner turns a
// failing assertion's `expected` and `actual` into JSON for the Allure result with a plain
// JSON.stringify, which throws on a bigint; the test then reports that TypeError ("Do not know how to
// serialize a BigInt") instead of its assertion, and the run counts a target's failure as a harness
// error. Every uint64 in the documents is a bigint here, so bigints get a JSON form for such reports:
// the decimal digits with the `n` suffix, as vitest prints them. Nothing a suite sends or checks uses
// JSON.stringify on a bigint (requests are encoded and replies parsed by harness/oracle/json.ts) and the
// system under test runs in its own process. The unit project does not load this: its tests run the
// reference system in process, where a stray JSON.stringify of a bigint must still throw.

declare global {
  interface BigInt {
    toJSON?: () => string;
  }
}

if (!Object.prototype.hasOwnProperty.call(BigInt.prototype, 'toJSON')) {
  Object.defineProperty(BigInt.prototype, 'toJSON', {
    value(this: bigint) {
      return `${this.toString()}n`;
    },
    configurable: true,
    writable: true,
  });
}

export {};
