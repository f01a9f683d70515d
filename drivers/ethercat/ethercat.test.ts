// The EtherCAT driver over the fake master, the fake master's faithfulness to node-ethercat's API, and the
// node-ethercat adapter against a module-shaped stand-in (the real module needs IgH and is absent here).

import { execFileSync } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { afterEach, describe, expect, test } from 'vitest';
import { AL, ProcessImage, STANDARD_MAPPING, type BusSetup } from '../bus.ts';
import { testBusSetup } from '../test-setup.ts';
import { DriverHost } from '../host.ts';
import { createDriver, DriverUnavailable } from '../index.ts';
import type { EthercatBusDriver } from './ethercat.ts';
import { FakeEthercatMaster } from './fake-master.ts';
import { createFakeEthercatDriver, FAKE_FAULT_KINDS, benchFor } from './fake-driver.ts';
import { AXIS_MAPPING, IO_MAPPING, interpolationPeriod, mappingWord, pdoConfigSdos, planBus, slaveOptions } from './layout.ts';
import { call, wrapToPin, type EthercatMaster, type MasterResult, type SlaveOptions } from './master.ts';
import { NodeEthercatMaster, nodeEthercatFactory, type NodeEthercatModule } from './node-ethercat.ts';
import { importNodeEthercat } from './driver.ts';
import { schedulingOf } from '../thread-scheduling.ts';

const CYCLE = 1_000_000n;
const AXES = 3;
const SETUP: BusSetup = testBusSetup(AXES, { vendorId: 0x1337, productCode: 0x4660 }, { expectedMapping: STANDARD_MAPPING });
/** Per slave: 1 for its inputs, 2 for its outputs (LRW); three axis slaves and the I/O terminal. */
const WKC = 4 * 3;
const IO_POS = 3;

const open: DriverHost[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
});

async function onFake(params: Record<string, unknown> = {}) {
  const d = createFakeEthercatDriver({ params: { cycle: 'lockstep', ...params } });
  const host = new DriverHost(d);
  open.push(host);
  const startup = await host.open(SETUP);
  host.activate();
  const img = new ProcessImage(AXES);
  let t = 1_000_000_000n;
  const step = (n = 1) => {
    let rc = 0;
    for (let k = 0; k < n; k++) rc = host.exchange(img, (t += CYCLE));
    return rc;
  };
  const fake = d.masterAdapter as FakeEthercatMaster;
  return { d, host, startup, img, step, fake };
}

describe('layout: what goes on the bus for a configuration', () => {
  test('one CSP slave per axis at its slave_position and the I/O terminal after them, pins named <id>.<entry>', () => {
    const plan = planBus(SETUP);
    expect(plan.map((s) => [s.id, s.kind, s.position, s.axis])).toEqual([
      ['s0', 'axis', 0, 0],
      ['s1', 'axis', 1, 1],
      ['s2', 'axis', 2, 2],
      ['s3', 'io', 3, -1],
    ]);
    expect(planBus(SETUP, { ioSlavePosition: 9 }).at(-1)!.position).toBe(9);
    expect(() => planBus(SETUP, { ioSlavePosition: 1 })).toThrow(/axis/);
    const o = slaveOptions(plan[0]!);
    expect(o.definition.id).toEqual({ vendor: 0x1337, product: 0x4660 });
    expect(o.definition.syncs.map((s) => [s.syncManager, s.direction, s.pdos[0]!.index])).toEqual([
      [2, 'output', '0x1600'],
      [3, 'input', '0x1a00'],
    ]);
    expect(o.definition.syncs[0]!.pdos[0]!.entries.map((e) => e.name)).toEqual(['controlword', 'modes_of_operation', 'target_position']);
    expect(o.definition.syncs[1]!.pdos[0]!.entries.map((e) => `${e.index}:${e.subindex} ${e.type}`)).toEqual([
      '0x6041:0 uint16',
      '0x6061:0 int8',
      '0x6064:0 int32',
      '0x606c:0 int32',
      '0x60f4:0 int32',
      '0x6077:0 int16',
      '0x603f:0 uint16',
      '0x60fd:0 uint32',
      '0x2000:1 int32',
      '0x2000:2 uint8',
    ]);
  });

  test('the SDO start-up list comes from the configuration: CSP, interpolation period, following error window, limits, velocity', () => {
    const sdos = planBus({ ...SETUP, axes: [{ ...SETUP.axes[0]!, sign: -1, minPosition: -1, maxPosition: 2 }] })[0]!.sdos;
    expect(sdos).toEqual([
      { index: 0x6060, subindex: 0, type: 'int8', value: 8 },
      { index: 0x60c2, subindex: 1, type: 'uint8', value: 1 },
      { index: 0x60c2, subindex: 2, type: 'int8', value: -3 },
      { index: 0x6065, subindex: 0, type: 'uint32', value: 5000 },
      { index: 0x607d, subindex: 1, type: 'int32', value: -200_000 }, // sign -1: the drive's limits swap
      { index: 0x607d, subindex: 2, type: 'int32', value: 100_000 },
      { index: 0x607f, subindex: 0, type: 'uint32', value: 200_000 },
    ]);
    expect(interpolationPeriod(250_000n)).toEqual({ value: 25, exponent: -5 });
    expect(interpolationPeriod(125_000n)).toEqual({ value: 125, exponent: -6 });
    expect(interpolationPeriod(2_000_000n)).toEqual({ value: 2, exponent: -3 });
    expect(mappingWord(AXIS_MAPPING[0]!)).toBe(0x60400010);
    expect(mappingWord(AXIS_MAPPING.at(-1)!)).toBe(0x20000208);
  });
});

describe('bring-up choices of the configuration (document 3 bus_bringup, io.slave_position)', () => {
  test('explicit PDO configuration: the assignment and mapping written by SDO, in CoE order, before the rest of the list', () => {
    expect(pdoConfigSdos(IO_MAPPING).map((x) => `${x.index.toString(16)}:${x.subindex}=${x.value.toString(16)} ${x.type}`)).toEqual([
      '1c12:0=0 uint8',
      '1600:0=0 uint8',
      '1600:1=70000110 uint32',
      '1600:0=1 uint8',
      '1c12:1=1600 uint16',
      '1c12:0=1 uint8',
      '1c13:0=0 uint8',
      '1a00:0=0 uint8',
      '1a00:1=60000120 uint32',
      '1a00:2=60100108 uint32',
      '1a00:0=2 uint8',
      '1c13:1=1a00 uint16',
      '1c13:0=1 uint8',
    ]);
    const plan = planBus(SETUP, { explicitPdoConfig: true });
    expect(plan[0]!.sdos.slice(0, 2)).toEqual([
      { index: 0x1c12, subindex: 0, type: 'uint8', value: 0 },
      { index: 0x1600, subindex: 0, type: 'uint8', value: 0 },
    ]);
    expect(plan[0]!.sdos.at(-1)).toEqual({ index: 0x607f, subindex: 0, type: 'uint32', value: 200_000 });
    expect(planBus(SETUP).at(-1)!.sdos).toEqual([]);
    expect(slaveOptions(plan[0]!, { outputWatchdog: false }).definition.syncs.map((x) => x.watchdog)).toEqual(['disable', 'disable']);
    expect(slaveOptions(plan[0]!).definition.syncs.map((x) => x.watchdog)).toEqual(['enable', 'disable']);
  });

  test('with explicit_pdo_config a drive whose firmware maps otherwise is configured, not distrusted; io.slave_position places the terminal', async () => {
    const d = createFakeEthercatDriver({ params: { cycle: 'lockstep', startFaults: [{ kind: 'pdo_mapping_mismatch', axis: 1 }] } });
    const host = new DriverHost(d);
    open.push(host);
    const startup = await host.open({ ...SETUP, ioSlavePosition: 7, bringup: { explicitPdoConfig: true, disableOutputWatchdog: true, safeopOpTimeoutMs: 100 } });
    expect(startup.mappingMismatchMask).toBe(0);
    expect(startup.notes[0]).toMatch(/I\/O terminal at position 7$/);
    const fake = d.masterAdapter as FakeEthercatMaster;
    expect(fake.od.get(1)!.get(`${0x1a00}:5`)).toBe(0x60f40020);
    host.activate();
    const img = new ProcessImage(AXES);
    expect(host.exchange(img, 1_000_000_000n)).toBe(0);
    expect(img.ioInputValid).toBe(1);
  });
});

describe('the fake master keeps node-ethercat 1.0.5 behaviour', () => {
  const bench = () => benchFor(SETUP, planBus(SETUP), {});
  const add = (m: FakeEthercatMaster, o: SlaveOptions) => call<{ index: number }>((cb) => m.addSlave(o, cb));

  test('addSlave checks definitions with node-ethercat texts; pins have no offset until start; start twice is refused', async () => {
    const m = new FakeEthercatMaster({ mode: 'lockstep', bench: bench() });
    const good = slaveOptions(planBus(SETUP)[0]!);
    expect(await add(m, { ...good, id: '' })).toEqual({ result: 'error', error: 'Please provide slave id' });
    expect(await add(m, { ...good, definition: { ...good.definition, syncs: [{ ...good.definition.syncs[0]!, direction: 'both' as never }] } })).toEqual({ result: 'error', error: 'direction in sync must either be input or output' });
    const bad64 = { ...good, definition: { ...good.definition, syncs: [{ ...good.definition.syncs[0]!, pdos: [{ index: '0x1600', entries: [{ index: '0x6040', subindex: 0, name: 'x', type: 'uint64' as never }] }] }] } };
    expect(await add(m, bad64)).toEqual({ result: 'error', error: 'Unknown pdo type: uint64' });
    expect(await add(m, good)).toEqual({ result: 'ok', data: { index: 0 } });
    expect(await add(m, good)).toMatchObject({ result: 'error', error: 'Duplicate slave. Please provide unique slave names' });
    expect(m.getPins()['s0.controlword']!.offset).toBe(-1);
    expect(m.readPin('s0.controlword')).toBeUndefined();
    expect(await call((cb) => m.start({}, cb))).toEqual({ result: 'ok', data: {} });
    // offsets: outputs then inputs, packed in registration order
    expect(['controlword', 'modes_of_operation', 'target_position', 'statusword', 'modes_of_operation_display', 'position_actual'].map((n) => m.getPins()[`s0.${n}`]!.offset)).toEqual([0, 2, 3, 7, 9, 10]);
    expect(await call((cb) => m.start({}, cb))).toEqual({ result: 'error', error: 'Already started' });
  });

  test('pins hold 8/16/32-bit values the way EC_WRITE_* does: low bits kept, out-of-range writes counted', async () => {
    const m = new FakeEthercatMaster({ mode: 'lockstep', bench: bench() });
    await add(m, slaveOptions(planBus(SETUP)[0]!));
    await call((cb) => m.start({}, cb));
    m.writePin('s0.controlword', 0xffff);
    expect(m.readPin('s0.controlword')).toBe(0xffff);
    m.writePin('s0.controlword', 0x1_0006);
    expect(m.readPin('s0.controlword')).toBe(6);
    m.writePin('s0.modes_of_operation', 200);
    expect(m.readPin('s0.modes_of_operation')).toBe(-56);
    m.writePin('s0.modes_of_operation', -128);
    expect(m.readPin('s0.modes_of_operation')).toBe(-128);
    m.writePin('s0.target_position', 0x7fff_ffff);
    expect(m.readPin('s0.target_position')).toBe(0x7fff_ffff);
    m.writePin('s0.target_position', 0x8000_0000);
    expect(m.readPin('s0.target_position')).toBe(-0x8000_0000);
    expect(m.outOfRangeWrites).toEqual([
      { name: 's0.controlword', value: 0x1_0006 },
      { name: 's0.modes_of_operation', value: 200 },
      { name: 's0.target_position', value: 0x8000_0000 },
    ]);
    expect(wrapToPin('uint16', 70_000)).toBe(4464);
    expect(wrapToPin('int16', 0x8000)).toBe(-0x8000);
    expect(wrapToPin('uint32', -1)).toBe(0xffff_ffff);
    expect(m.readPin('nope')).toBeUndefined();
    expect(() => m.writePin('s0.controlword', undefined as never)).toThrow('writePin please provide value');
  });

  test('SDO downloads: type limits, refusals with the slave\'s abort code, and start() stopping at the first refusal', async () => {
    const b = benchFor(SETUP, planBus(SETUP), { sdoAborts: [{ position: 1, index: 0x607d, subindex: 1, abortCode: 0x06090030 }] });
    const m = new FakeEthercatMaster({ mode: 'lockstep', bench: b });
    const plan = planBus(SETUP);
    await add(m, slaveOptions(plan[0]!));
    await add(m, { ...slaveOptions(plan[1]!), config: plan[1]!.sdos.map((params) => ({ type: 'sdo' as const, params })) });
    const sdo = (slaveId: string, index: number, subindex: number, type: 'uint8' | 'int8' | 'uint16' | 'uint32', value: number) => call((cb) => m.configSdo({ slaveId, index, subindex, type, value }, cb));
    expect(await sdo('s0', 0x60c2, 1, 'uint8', 255)).toEqual({ result: 'ok', data: {} });
    expect(await sdo('s0', 0x60c2, 1, 'uint8', 256)).toMatchObject({ result: 'error', abortCode: 0x06090031, error: expect.stringMatching(/^SDO abort 0x06090031 \(value of parameter written too high\) slave 0 0x60c2:01$/) });
    expect(await sdo('s0', 0x60c2, 2, 'int8', -129)).toMatchObject({ result: 'error', abortCode: 0x06090032 });
    expect(await sdo('s0', 0x6065, 0, 'uint32', 1.5)).toMatchObject({ result: 'error', abortCode: 0x06070010 });
    expect(await sdo('s9', 0x6065, 0, 'uint32', 1)).toEqual({ result: 'error', error: 'Cannot find slave with Ids9' });
    expect(await sdo('s0', 0x6065, 0, 'uint32', Number.NaN)).toEqual({ result: 'error', error: 'Please supply valid value' });
    const started = await call((cb) => m.start({}, cb));
    expect(started).toMatchObject({ result: 'error', abortCode: 0x06090030, error: expect.stringContaining('slave 1 0x607d:01') });
    // the list ran in order up to the refusal
    expect([...m.od.get(1)!.keys()]).toEqual([`${0x6060}:0`, `${0x60c2}:1`, `${0x60c2}:2`, `${0x6065}:0`]);
  });
});

describe('the EtherCAT driver over the fake master (lockstep)', () => {
  test('bring-up on a bench that matches: no mismatch, identities checked, every pin written and read each cycle', async () => {
    const { startup, img, step, fake, d } = await onFake();
    expect(startup.mappingMismatchMask).toBe(0);
    expect(startup.notes).toEqual([`ethercat: master ${fake.label}; 3 axis slaves, I/O terminal at position 3`]);
    // the start-up list reached every axis drive
    expect(fake.od.get(2)!.get(`${0x607f}:0`)).toBe(200_000);
    expect(step(3)).toBe(0);
    expect([...img.online]).toEqual([1, 1, 1]);
    expect([...img.alState]).toEqual([AL.op, AL.op, AL.op]);
    expect([...img.pdoFresh]).toEqual([1, 1, 1]);
    expect(img.wkcExpected).toBe(WKC);
    expect(img.wkcActual).toBe(WKC);
    expect(img.safetyChainClosed).toBe(1);
    expect(img.ioInputValid).toBe(1);
    expect(img.statusword[0]! & 0x4f).toBe(0x40); // switch on disabled
    expect(img.absoluteValid[0]).toBe(1);
    // outputs travel: shutdown, switch on, enable in CSP follow the CiA 402 table on the simulated drive
    img.modeOfOperation.fill(8);
    for (const cw of [0x06, 0x07, 0x0f]) {
      img.controlword.fill(cw);
      step(2);
    }
    expect(img.statusword[1]! & 0x6f).toBe(0x27); // operation enabled
    img.targetPosition[1] = img.positionActual[1]! + 5000;
    img.ioOutputWord = 0b101;
    step(200);
    expect(Math.abs(img.positionActual[1]! - img.targetPosition[1]!)).toBeLessThan(50);
    expect(img.ioInputWord & 0xffff).toBe(0b101); // output readback through the terminal
    expect(img.ioInputWord >>> 16).toBe(0xffff); // fast inputs satisfied
    // the driver never wrote a value its pin cannot hold
    expect(fake.outOfRangeWrites).toEqual([]);
    expect(d.identity()).toMatchObject({ slaves: expect.arrayContaining([expect.objectContaining({ position: 3, kind: 'io' })]) });
  });

  test('a slave whose firmware maps another object: read back, compared, that axis in the mismatch mask with the entry named', async () => {
    const { startup, img, step } = await onFake({ startFaults: [{ kind: 'pdo_mapping_mismatch', axis: 2 }] });
    expect(startup.mappingMismatchMask).toBe(0b100);
    expect(startup.notes).toContain('ethercat: slave 2 (axis 2): PDO mapping differs: 0x1a00 entry 5 is 0x60620020, expected 0x60f40020');
    step();
    expect(img.pdoFresh[2]).toBe(1); // still exchanged; the core refuses to enable it (restart_required)
  });

  test('a start-up SDO the drive refuses: that axis in the mismatch mask with the abort code, the rest of its list skipped', async () => {
    const { startup, fake } = await onFake({ sdoAborts: [{ position: 1, index: 0x6065, subindex: 0, abortCode: 0x06090031 }] });
    expect(startup.mappingMismatchMask).toBe(0b010);
    expect(startup.notes).toContain('ethercat: slave 1 (axis 1): start-up SDO 0x6065:00 = 5000 refused: SDO abort 0x06090031 (value of parameter written too high) slave 1 0x6065:00');
    expect(fake.od.get(1)!.has(`${0x607d}:1`)).toBe(false);
    expect(fake.od.get(0)!.has(`${0x607d}:1`)).toBe(true);
  });

  test('a slave of another make at a position stays in PREOP: mismatch mask, offline, working counter short', async () => {
    const { startup, img, step } = await onFake({ identity: [{ position: 0, vendor: 0x1337, product: 0x9999 }] });
    expect(startup.mappingMismatchMask).toBe(0b001);
    expect(startup.notes).toContain('ethercat: slave 0 (axis 0): found vendor 0x00001337 product 0x00009999, configured vendor 0x00001337 product 0x00004660');
    step();
    expect(img.alState[0]).toBe(AL.preop);
    expect(img.online[0]).toBe(0);
    expect(img.pdoFresh[0]).toBe(0);
    expect(img.wkcActual).toBe(WKC - 3);
  });

  test('no slave at a position: mismatch mask, AL state 0, offline; a missing I/O terminal means an open E-stop chain and no inputs', async () => {
    const { startup, img, step } = await onFake({ absent: [1, IO_POS] });
    expect(startup.mappingMismatchMask).toBe(0b010);
    expect(startup.notes).toContain('ethercat: slave 1 (axis 1): no slave answers at this position');
    expect(startup.notes).toContain('ethercat: slave 3 (I/O terminal): no slave answers at this position');
    step();
    expect([...img.online]).toEqual([1, 0, 1]);
    expect(img.alState[1]).toBe(0);
    expect(img.safetyChainClosed).toBe(0);
    expect(img.ioInputValid).toBe(0);
    expect(img.wkcActual).toBe(WKC - 6);
  });

  test('link down: every slave offline and stale, working counter 0, chain read as open; link back restores all', async () => {
    const { img, step, fake } = await onFake();
    step(2);
    fake.inject({ kind: 'link_down' });
    expect(step()).toBe(0);
    expect([...img.online]).toEqual([0, 0, 0]);
    expect([...img.alState]).toEqual([0, 0, 0]);
    expect([...img.pdoFresh]).toEqual([0, 0, 0]);
    expect(img.wkcActual).toBe(0);
    expect(img.wkcExpected).toBe(WKC);
    expect(img.safetyChainClosed).toBe(0);
    expect(img.ioInputValid).toBe(0);
    expect(fake.getMasterState()).toEqual({ slaves_responding: 0, al_states: 0, link_up: 0 });
    fake.inject({ kind: 'clear' });
    step();
    expect([...img.online]).toEqual([1, 1, 1]);
    expect(img.wkcActual).toBe(WKC);
    expect(img.safetyChainClosed).toBe(1);
  });

  test('slave lost, AL state change, working-counter drop: each seen as the sim driver reports it', async () => {
    const { img, step, fake } = await onFake();
    step();
    fake.inject({ kind: 'slave_lost', position: 1 });
    step();
    expect([...img.online]).toEqual([1, 0, 1]);
    expect([...img.pdoFresh]).toEqual([1, 0, 1]);
    expect(img.wkcActual).toBe(WKC - 3);
    expect(fake.getMasterState()).toEqual({ slaves_responding: 3, al_states: AL.op, link_up: 1 });
    fake.inject({ kind: 'clear' });
    fake.inject({ kind: 'al_state', position: 2, state: AL.safeop });
    step();
    expect(img.alState[2]).toBe(AL.safeop);
    expect(img.online[2]).toBe(0); // outside OP a slave takes no outputs: not part of the exchange
    expect(img.wkcActual).toBe(WKC - 2); // it still sends its inputs (1), takes no outputs (2)
    expect(fake.getMasterState().al_states).toBe(AL.op | AL.safeop);
    fake.inject({ kind: 'clear' });
    fake.inject({ kind: 'wkc_drop' });
    step();
    expect(img.wkcActual).toBe(WKC - 1);
    expect([...img.online]).toEqual([1, 1, 1]);
  });

  test('a stale cycle: inputs stay fresh for exactly staleAfterCycles core cycles without a bus cycle, then freshness clears', async () => {
    const { img, step, fake } = await onFake({ staleAfterCycles: 3 });
    step(2);
    fake.inject({ kind: 'stale_cycle' });
    const fresh: number[] = [];
    for (let k = 0; k < 5; k++) {
      step();
      fresh.push(img.pdoFresh[0]!);
    }
    expect(fresh).toEqual([1, 1, 1, 0, 0]);
    expect(img.ioInputValid).toBe(0);
    expect(img.safetyChainClosed).toBe(1); // a late master keeps the last chain reading
    fake.inject({ kind: 'clear' });
    step();
    expect([...img.pdoFresh]).toEqual([1, 1, 1]);
    expect(img.ioInputValid).toBe(1);
  });

  test('the fault facet maps the shared vocabulary onto the bus; frozen_feedback is not offered (an EtherCAT master cannot see it)', async () => {
    const { d, img, step } = await onFake();
    expect(FAKE_FAULT_KINDS).not.toContain('frozen_feedback');
    expect(() => d.faults!.inject({ kind: 'frozen_feedback', axis: 0 })).toThrow(expect.objectContaining({ code: 'FAULT_NOT_SUPPORTED' }));
    expect(() => d.faults!.inject({ kind: 'slave_offline', axis: 3 })).toThrow(expect.objectContaining({ code: 'FAULT_NO_SUCH_AXIS' }));
    d.faults!.inject({ kind: 'slave_offline', axis: 0 });
    d.faults!.inject({ kind: 'drive_fault', axis: 2, errorCode: 0x2310 });
    step(2);
    expect([...img.online]).toEqual([0, 1, 1]);
    expect(img.errorCode[2]).toBe(0x2310);
    expect(img.statusword[2]! & 0x4f).toBe(0x08); // fault
    d.faults!.inject({ kind: 'estop_open' });
    step();
    expect(img.safetyChainClosed).toBe(0);
    d.faults!.clear();
    step();
    expect([...img.online]).toEqual([1, 1, 1]);
    expect(img.safetyChainClosed).toBe(1);
  });
});

describe('the fake master on its own cycle thread', () => {
  test('it cycles at the configured period without the driver, and the driver reads current inputs at its own times', async () => {
    const d = createFakeEthercatDriver({ params: { cycle: 'thread', staleAfterCycles: 50 } });
    const host = new DriverHost(d);
    open.push(host);
    await host.open(SETUP);
    host.activate();
    const fake = d.masterAdapter as FakeEthercatMaster;
    expect(fake.sync).toBeUndefined();
    const c0 = fake.cycleCounter();
    await new Promise((r) => setTimeout(r, 60));
    const c1 = fake.cycleCounter();
    expect(c1).toBeGreaterThan(c0); // no exchange was called: the master cycled on its own
    const img = new ProcessImage(AXES);
    expect(host.exchange(img, process.hrtime.bigint())).toBe(0);
    expect([...img.pdoFresh]).toEqual([1, 1, 1]);
    expect(img.safetyChainClosed).toBe(1);
    // an out-of-band condition reaches the thread at its next cycle
    fake.inject({ kind: 'stale_cycle' });
    await new Promise((r) => setTimeout(r, 20));
    const frozen = fake.cycleCounter();
    await new Promise((r) => setTimeout(r, 20));
    expect(fake.cycleCounter()).toBe(frozen);
    const now = process.hrtime.bigint();
    host.exchange(img, now); // the driver sees the last counter value once
    // 50 cycles of 1 ms on core time without a bus cycle: stale
    host.exchange(img, now + 51n * CYCLE);
    expect([...img.pdoFresh]).toEqual([0, 0, 0]);
    fake.inject({ kind: 'clear' });
    await new Promise((r) => setTimeout(r, 20));
    expect(fake.cycleCounter()).toBeGreaterThan(frozen);
    host.exchange(img, process.hrtime.bigint());
    expect([...img.pdoFresh]).toEqual([1, 1, 1]);
  });
});

/** This process's threads under a real-time policy, with it ('SCHED_FIFO 49'), read from /proc/self/task. */
function realTimeThreads(): Map<string, string> {
  const out = new Map<string, string>();
  for (const tid of readdirSync('/proc/self/task')) {
    const s = schedulingOf(`/proc/self/task/${tid}/stat`); // undefined: the thread ended while we looked
    if (s && !s.startsWith('SCHED_OTHER')) out.set(tid, s);
  }
  return out;
}

describe('the fake master\'s cycle thread is at real-time priority only while it cycles', () => {
  test('made by a SCHED_FIFO 40 thread (the real-time core\'s), it is born and sets the bus up at normal scheduling, cycles at SCHED_FIFO 49 with no other thread of its raised, and is back at normal scheduling before it ends', async ({ skip }) => {
    skip(process.platform !== 'linux', 'thread scheduling is read from /proc and set with chrt (Linux)');
    const m = new FakeEthercatMaster({ mode: 'thread', bench: benchFor(SETUP, planBus(SETUP), {}) });
    for (const s of planBus(SETUP)) expect(await call((cb) => m.addSlave(slaveOptions(s), cb))).toMatchObject({ result: 'ok' });
    expect(await call((cb) => m.start({}, cb))).toMatchObject({ result: 'ok' });
    const before = realTimeThreads();
    // This thread takes SCHED_FIFO 40 for activate()'s synchronous part only, where the cycle thread is made,
    // as the core's thread has it (sims/core/host.ts); a new thread would inherit it.
    const tid = readlinkSync('/proc/thread-self').split('/').pop()!;
    const nice = getPriority(0);
    try {
      execFileSync('chrt', ['-f', '-p', '40', tid], { stdio: 'ignore', timeout: 2000 });
    } catch {
      skip(true, 'SCHED_FIFO is not permitted here (chrt -f refused): no real-time policy to inherit or give back');
    }
    let activated: Promise<MasterResult>;
    let creator: string;
    try {
      activated = call((cb) => m.activate({}, cb));
      creator = execFileSync('chrt', ['-p', tid], { encoding: 'utf8', timeout: 2000 });
    } finally {
      execFileSync('chrt', ['-o', '-p', '0', tid], { stdio: 'ignore', timeout: 2000 });
      if (getPriority(0) !== nice) setPriority(0, nice);
    }
    // The maker keeps its own scheduling, and no SCHED_RESET_ON_FORK it did not have.
    expect(creator).toMatch(/policy: SCHED_FIFO\n.*priority: 40\n$/);
    try {
      expect(await activated).toEqual({ result: 'ok', data: {} });
      // Only the cycling thread is raised: from source, the TypeScript loader's hooks thread, which the cycle
      // thread starts (fake-worker-entry.mjs), is born at normal scheduling too.
      const raised = [...realTimeThreads()].filter(([t]) => !before.has(t));
      expect(raised.map(([, s]) => s)).toEqual(['SCHED_FIFO 49']);
      // What the thread read of itself (fake-worker.ts): born normal, normal while it set the bus up, then SCHED_FIFO 49.
      expect(m.cycleThread.born, 'the thread is born at normal scheduling').toMatch(/^SCHED_OTHER/);
      expect(m.cycleThread.setup, 'the bus is set up at normal scheduling').toMatch(/^SCHED_OTHER/);
      expect(m.cycleThread.cycling).toBe('SCHED_FIFO 49');
    } finally {
      await m.close();
    }
    // What the thread read of itself when the stop reached it, sent before it ended (fake-worker.ts end):
    // the master had lowered it already, so it started no chrt of its own at SCHED_FIFO 49.
    expect(m.cycleThread.stopped, 'the thread ends at normal scheduling').toMatch(/^SCHED_OTHER nice -?\d+$/);
    expect([...realTimeThreads().keys()].filter((t) => !before.has(t)), 'no thread left at a real-time policy').toEqual([]);
  });
});

describe('node-ethercat', () => {
  test('absent here: the ethercat driver says DRIVER_MODULE_MISSING with the install hint', async () => {
    await expect(importNodeEthercat()).rejects.toSatisfy((e: unknown) => e instanceof DriverUnavailable && e.code === 'DRIVER_MODULE_MISSING' && /npm install node-ethercat@1\.0\.5/.test(e.message));
    await expect(createDriver('ethercat')).rejects.toMatchObject({ code: 'DRIVER_MODULE_MISSING' });
  });

  /** A stand-in with node-ethercat's exports and its quirks (int8 read as uint8, SDOs written as 8 bits). */
  function stub() {
    const pins: Record<string, { name: string; offset: number; size: 8 | 16 | 32; type: 'int8' | 'uint32' | 'uint16'; slaveId: string; index: number; subindex: number }> = {
      'a.m': { name: 'a.m', offset: 0, size: 8, type: 'int8', slaveId: 'a', index: 0x6061, subindex: 0 },
      'a.d': { name: 'a.d', offset: 1, size: 32, type: 'uint32', slaveId: 'a', index: 0x60fd, subindex: 0 },
    };
    const writes: Array<[string, number]> = [];
    const sdos: unknown[] = [];
    const mod: NodeEthercatModule = {
      addSlave: (_o, cb) => cb({ result: 'ok', data: { index: 0 } }),
      start: (_o, cb) => cb({ result: 'ok', data: {} }),
      activate: (_o, cb) => cb({ result: 'ok', data: {} }),
      configSdo: (o, cb) => {
        sdos.push(o);
        cb({ result: 'ok', data: {} });
      },
      readPin: (name) => (name === 'a.m' ? 0xfe : 7),
      writePin: (name, v) => void writes.push([name, v]),
      getPins: () => pins,
      getMasterState: () => ({ slaves_responding: 1, al_states: 8, link_up: 1 }),
    };
    return { mod, writes, sdos };
  }

  test('the adapter corrects its quirks: int8 sign, uint32 as the same bits, 16/32-bit SDOs refused instead of cut to 8 bits', async () => {
    const { mod, writes, sdos } = stub();
    const m = new NodeEthercatMaster(mod);
    expect(m.readPin('a.m')).toBe(-2);
    m.writePin('a.d', 0xffff_fffe);
    expect(writes).toEqual([['a.d', -2]]);
    const r = (await call((cb) => m.configSdo({ slaveId: 'a', index: 0x6065, subindex: 0, type: 'uint32', value: 5000 }, cb))) as MasterResult;
    expect(r).toMatchObject({ result: 'error', error: expect.stringContaining('ecrt_slave_config_sdo8') });
    expect(sdos).toEqual([]);
    expect(await call((cb) => m.configSdo({ slaveId: 'a', index: 0x6060, subindex: 0, type: 'int8', value: 8 }, cb))).toEqual({ result: 'ok', data: {} });
    const adapter: EthercatMaster = m;
    expect(adapter.uploadSdo).toBeUndefined();
    expect(adapter.cycleCounter).toBeUndefined();
  });

  test('node-ethercat is one master per process: a second bring-up says so', async () => {
    const { mod } = stub();
    const factory = nodeEthercatFactory(mod);
    const first = factory({}) as EthercatBusDriver;
    // the stub has no pins for this layout: the first bring-up fails on unbound pins, having claimed the master
    await expect(first.open(SETUP)).rejects.toMatchObject({ code: 'ETHERCAT_PIN_UNBOUND' });
    await expect(factory({}).open(SETUP)).rejects.toThrow(/one master per process/);
    expect(() => nodeEthercatFactory({})).toThrow(/does not export/);
  });
});
