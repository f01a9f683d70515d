// The contract every bus driver passes, run against each registry entry that can be had on this machine
// (a driver that cannot, such as ethercat without node-ethercat, is skipped with its stated reason), plus
// the driver host's lifecycle and error boundary, which no driver re-implements.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BUS_RC, ProcessImage, type BusDriver, type BusSetup } from './bus.ts';
import { testBusSetup } from './test-setup.ts';
import { decodeStatusword, Ds402State } from './ds402.ts';
import { FAULT_KINDS, FaultSpecError } from './faults.ts';
import { DriverHost, DriverHostError } from './host.ts';
import { createDriver, DRIVERS, driverNames, DriverUnavailable } from './index.ts';
import { RecordingDriver } from './replay/recorder.ts';

const AXES = 3;
const CYCLE = 1_000_000n;
const SETUP: BusSetup = testBusSetup(AXES);

// The replay driver plays a recording: a small one is made here from the sim driver on the same setup,
// with the outputs the contract's own exchanges write (none), so a strict replay of it passes.
const REC_DIR = mkdtempSync(join(tmpdir(), 'hil-contract-'));
const RECORDING = join(REC_DIR, 'contract.hilrec');
beforeAll(async () => {
  const rec = new DriverHost(new RecordingDriver(await createDriver('sim'), RECORDING, { run: 'drivers contract' }));
  await rec.open(SETUP);
  rec.activate();
  const img = new ProcessImage(AXES);
  for (let k = 1; k <= 50; k++) rec.exchange(img, 1_000_000_000n + BigInt(k) * CYCLE);
  await rec.close();
});
afterAll(() => rmSync(REC_DIR, { recursive: true, force: true }));

/** The params each driver needs to be created in this test. */
const PARAMS: Record<string, Record<string, unknown>> = {
  replay: { file: RECORDING, mode: 'strict', reportFile: '' },
  // The contract's exchanges run back to back on made-up time: the fake master cycles once per exchange.
  // Its own-thread cycle is tested in drivers/ethercat/ethercat.test.ts.
  'ethercat-fake': { cycle: 'lockstep' },
};

async function tryCreate(name: string, persisted?: unknown): Promise<BusDriver | string> {
  try {
    const params = PARAMS[name];
    return await createDriver(name, { ...(persisted === undefined ? {} : { persisted }), ...(params ? { params } : {}) });
  } catch (e) {
    if (e instanceof DriverUnavailable) return `${e.code}: ${e.message}`;
    throw e;
  }
}

test('the registry names sim, replay, ethercat and ethercat-fake; an unknown name is refused with DRIVER_UNKNOWN', async () => {
  expect(driverNames()).toEqual(['sim', 'replay', 'ethercat', 'ethercat-fake']);
  for (const n of driverNames()) expect(DRIVERS[n]!.name).toBe(n);
  await expect(createDriver('nope')).rejects.toMatchObject({ code: 'DRIVER_UNKNOWN' });
  await expect(createDriver('__proto__')).rejects.toMatchObject({ code: 'DRIVER_UNKNOWN' });
});

test('ethercat without node-ethercat: DRIVER_MODULE_MISSING naming the package (loaded only when chosen)', async (ctx) => {
  let present = true;
  try {
    await import('node-ethercat' as string);
  } catch {
    present = false;
  }
  if (present) ctx.skip('node-ethercat is installed here');
  await expect(createDriver('ethercat')).rejects.toMatchObject({ code: 'DRIVER_MODULE_MISSING', message: expect.stringContaining('node-ethercat') });
});

for (const name of driverNames()) {
  describe(`driver contract: ${name}`, () => {
    test('open, exchange, close through the host; name; image filled', async (ctx) => {
      const d = await tryCreate(name);
      if (typeof d === 'string') return ctx.skip(d);
      expect(d.name).toBe(name);
      const host = new DriverHost(d);
      const img = new ProcessImage(AXES);
      expect(host.exchange(img, 0n)).toBe(BUS_RC.inactive); // nothing is exchanged before open
      const startup = await host.open(SETUP);
      expect(Number.isInteger(startup.mappingMismatchMask)).toBe(true);
      expect(Array.isArray(startup.notes)).toBe(true);
      expect(host.state).toBe('opened');
      host.activate();
      expect(host.state).toBe('active');
      let t = 1_000_000_000n;
      for (let k = 0; k < 5; k++) expect(host.exchange(img, (t += CYCLE))).toBe(0);
      for (let i = 0; i < AXES; i++) {
        expect(img.online[i]).toBe(1);
        expect(img.pdoFresh[i]).toBe(1);
        // a powered drive leaves not-ready-to-switch-on on its own (CiA 402)
        expect(decodeStatusword(img.statusword[i]!)).not.toBe(Ds402State.NotReadyToSwitchOn);
      }
      expect(img.wkcExpected).toBeGreaterThan(0);
      expect(img.wkcActual).toBe(img.wkcExpected);
      await host.close();
      expect(host.state).toBe('closed');
      expect(host.exchange(img, (t += CYCLE))).toBe(BUS_RC.inactive);
    });

    test('fault facet (if offered): the shared vocabulary, refusals with codes, inject and clear', async (ctx) => {
      const d = await tryCreate(name);
      if (typeof d === 'string') return ctx.skip(d);
      if (!d.faults) return ctx.skip(`the ${name} driver offers no fault injection`);
      for (const k of d.faults.kinds) expect(Object.keys(FAULT_KINDS)).toContain(k);
      const host = new DriverHost(d);
      await host.open(SETUP);
      host.activate();
      const img = new ProcessImage(AXES);
      let t = 1_000_000_000n;
      host.exchange(img, (t += CYCLE));
      expect(img.safetyChainClosed).toBe(1);
      if (d.faults.kinds.includes('estop_open')) {
        d.faults.inject({ kind: 'estop_open' });
        host.exchange(img, (t += CYCLE));
        expect(img.safetyChainClosed).toBe(0);
        d.faults.clear();
        host.exchange(img, (t += CYCLE));
        expect(img.safetyChainClosed).toBe(1);
      }
      if (d.faults.kinds.includes('wkc_drop')) {
        d.faults.inject({ kind: 'wkc_drop' });
        host.exchange(img, (t += CYCLE));
        expect(img.wkcActual).toBeLessThan(img.wkcExpected);
        d.faults.clear();
      }
      expect(() => d.faults!.inject({ kind: 'slave_offline', axis: AXES })).toThrow(FaultSpecError);
      await host.close();
    });

    test('persist facet (if offered): a snapshot survives structured cloning and restores the drives', async (ctx) => {
      const d = await tryCreate(name);
      if (typeof d === 'string') return ctx.skip(d);
      if (!d.persist) return ctx.skip(`the ${name} driver keeps no drive state across a core restart`);
      const host = new DriverHost(d);
      await host.open(SETUP);
      host.activate();
      const img = new ProcessImage(AXES);
      let t = 1_000_000_000n;
      for (let k = 0; k < 3; k++) host.exchange(img, (t += CYCLE));
      const snap = structuredClone(d.persist.snapshot());
      const before = [...img.positionActual];
      const absBefore = [...img.absolutePosition];
      await host.close();
      const again = await tryCreate(name, snap);
      if (typeof again === 'string') throw new Error(again);
      const h2 = new DriverHost(again);
      await h2.open(SETUP);
      h2.activate();
      const img2 = new ProcessImage(AXES);
      h2.exchange(img2, (t += CYCLE));
      expect([...img2.positionActual]).toEqual(before);
      expect([...img2.absolutePosition]).toEqual(absBefore);
      await h2.close();
    });
  });
}

/** A driver that works, then fails the way the test says. */
class Failing implements BusDriver {
  readonly name = 'failing';
  calls = 0;
  constructor(private readonly mode: 'throw' | 'negative' | 'nan', private readonly after: number) {}
  async open() {
    return { mappingMismatchMask: 0, notes: [] };
  }
  exchange(img: ProcessImage): number {
    this.calls++;
    img.online.fill(1);
    img.pdoFresh.fill(1);
    if (this.calls <= this.after) return 0;
    if (this.mode === 'throw') throw new Error('bus gone');
    return this.mode === 'negative' ? -5 : Number.NaN;
  }
  async close() {}
}

test('host error boundary: a throw becomes BUS_RC.threw once, then inactive, the driver is never called again', async () => {
  const d = new Failing('throw', 2);
  const host = new DriverHost(d);
  await host.open(SETUP);
  host.activate();
  const img = new ProcessImage(AXES);
  expect(host.exchange(img, 1n)).toBe(0);
  expect(host.exchange(img, 2n)).toBe(0);
  expect(host.exchange(img, 3n)).toBe(BUS_RC.threw);
  expect(host.state).toBe('errored');
  expect(host.lastFailure).toMatchObject({ hook: 'exchange', atNs: 3n, message: 'Error: bus gone' });
  expect([...img.pdoFresh]).toEqual([0, 0, 0]); // nothing written in a failed cycle is trusted
  expect([...img.online]).toEqual([0, 0, 0]);
  expect(host.exchange(img, 4n)).toBe(BUS_RC.inactive);
  expect(d.calls).toBe(3);
  await host.close();
  expect(host.state).toBe('closed');
});

test('host error boundary: a negative return passes through and is counted; a non-integer is a failure', async () => {
  const neg = new DriverHost(new Failing('negative', 1));
  await neg.open(SETUP);
  neg.activate();
  const img = new ProcessImage(AXES);
  expect(neg.exchange(img, 1n)).toBe(0);
  expect(neg.exchange(img, 2n)).toBe(-5);
  expect(neg.exchange(img, 3n)).toBe(-5);
  expect(neg.state).toBe('active');
  expect(neg.submissionFailures).toBe(2);
  const nan = new DriverHost(new Failing('nan', 0));
  await nan.open(SETUP);
  nan.activate();
  expect(nan.exchange(img, 1n)).toBe(BUS_RC.threw);
  expect(nan.state).toBe('errored');
});

test('host lifecycle: each transition only from its state, with DRIVER_BAD_STATE; a failed open is errored', async () => {
  const host = new DriverHost(new Failing('negative', 99));
  expect(() => host.activate()).toThrow(DriverHostError);
  await host.open(SETUP);
  await expect(host.open(SETUP)).rejects.toMatchObject({ code: 'DRIVER_BAD_STATE' });
  host.activate();
  expect(() => host.activate()).toThrow(expect.objectContaining({ code: 'DRIVER_BAD_STATE' }));
  const broken: BusDriver = { name: 'broken', open: async () => Promise.reject(new Error('no link')), exchange: () => 0, close: async () => {} };
  const b = new DriverHost(broken);
  await expect(b.open(SETUP)).rejects.toMatchObject({ code: 'DRIVER_OPEN_FAILED' });
  expect(b.state).toBe('errored');
  expect(b.lastFailure).toMatchObject({ hook: 'open', message: 'Error: no link' });
});
