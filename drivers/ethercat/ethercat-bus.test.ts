// The core on the EtherCAT driver over the fake master (docs/architecture.md "The fake master"), in-process
// on the stepped clock with the fake in lockstep: each bus fault of the fake shows the documented fault bit
// (docs/profile.md, execution fault bits), the fault_latched event, and the telemetry record's evidence
// (CycleCaptureRecordV2 fields).

import { afterEach, expect, test } from 'vitest';
import { AL } from '../bus.ts';
import type { EthercatBusDriver } from './ethercat.ts';
import type { FakeEthercatMaster } from './fake-master.ts';
import type { FakeFault } from './fake-bus.ts';
import type { CompiledMachine } from '../../sims/config/types.ts';
import { CaptureReader } from '../../sims/core/capture/reader.ts';
import { AX, axisOffset, REC, RECORD_BYTES } from '../../sims/core/capture/layout.ts';
import { FAULT } from '../../sims/core/faults.ts';
import { CoreHost } from '../../sims/core/host.ts';
import { type FromCore } from '../../sims/core/protocol.ts';
import { NATIVE_REASON } from '../../sims/core/reasons.ts';
import { nineAxisMachine } from '../../sims/core/test-machine.ts';

const MACHINE: CompiledMachine = nineAxisMachine();
const N = MACHINE.axes.length;
const ALL = (1 << N) - 1;
const FOREVER = 1n << 62n;
/** Nine axis slaves and the I/O terminal, 3 each (LRW: 1 for inputs, 2 for outputs). */
const WKC = (N + 1) * 3;

const hosts: CoreHost[] = [];
afterEach(async () => {
  for (const h of hosts.splice(0)) await h.close();
});

async function onFakeBus(params: Record<string, unknown> = {}) {
  const sent: FromCore[] = [];
  const host = await CoreHost.create(
    { machine: MACHINE, driver: 'ethercat-fake', driverParams: { cycle: 'lockstep', ...params }, clock: { mode: 'stepped' }, captureRetentionMs: 100 },
    (m) => sent.push(m),
  );
  hosts.push(host);
  host.handle({ t: 'grant', generation: 7n, deadlineNs: FOREVER, active: true, axisMask: ALL });
  const fake = (host.driverHost.driver as EthercatBusDriver).masterAdapter as FakeEthercatMaster;
  const reader = new CaptureReader(host.core.capture!.buffer);
  let after = 0n;
  /** Run cycles; returns the records they wrote. */
  const run = (cycles: number): DataView[] => {
    for (let k = 0; k < cycles; k++) host.cycle();
    const b = reader.read(after);
    if (b === 'busy') throw new Error('capture ring busy');
    after = b.last;
    const out: DataView[] = [];
    for (let r = 0; r < b.count; r++) out.push(new DataView(b.records.buffer, b.records.byteOffset + r * RECORD_BYTES, RECORD_BYTES));
    return out;
  };
  const latched = () => sent.filter((m): m is Extract<FromCore, { t: 'event' }> => m.t === 'event' && m.type === 'fault_latched').map((m) => m.payload as { bit: number; name: string; axis_mask: number });
  const inject = (f: FakeFault) => fake.inject(f);
  let id = 100;
  const cmd = (op: 'enable' | 'reset_fault', axisMask = 0) => {
    const myId = id++;
    host.handle({ t: 'cmd', id: myId, op, generation: 7n, axisMask });
    return sent.find((m): m is Extract<FromCore, { t: 'reply' }> => m.t === 'reply' && m.id === myId);
  };
  const ready = sent.find((m): m is Extract<FromCore, { t: 'ready' }> => m.t === 'ready')!;
  return { host, fake, run, latched, inject, cmd, sent, ready };
}

const u32 = (r: DataView, off: number) => r.getUint32(off, true);
const u8 = (r: DataView, off: number) => r.getUint8(off);
const axisU8 = (r: DataView, axis: number, field: keyof typeof AX) => r.getUint8(axisOffset(axis) + AX[field]);
const bitValue = (name: string) => 1 << FAULT[name]!;

test('a healthy fake bus: no fault, full working counter, every slave operational and fresh in telemetry', async () => {
  const { run, latched, ready, host } = await onFakeBus();
  expect(ready.mappingMismatchMask).toBe(0);
  const recs = run(20);
  expect(latched()).toEqual([]);
  const last = recs.at(-1)!;
  expect(u32(last, REC.wkc_actual)).toBe(WKC);
  expect(u32(last, REC.wkc_expected)).toBe(WKC);
  expect(u32(last, REC.execution_fault_reasons)).toBe(0);
  expect(u32(last, REC.pdo_fresh_axis_mask)).toBe(ALL);
  expect(u32(last, REC.io_input_valid)).toBe(1);
  for (let i = 0; i < N; i++) {
    expect(axisU8(last, i, 'slave_al_state')).toBe(AL.op);
    expect(axisU8(last, i, 'slave_operational')).toBe(1);
  }
  expect(host.core.status(host.core.now).driver).toMatchObject({ name: 'ethercat-fake', state: 'active' });
});

test('link down: slave_offline on every axis, working_counter, safety_chain_open; telemetry shows wkc 0 and no slave operational', async () => {
  const { run, latched, inject } = await onFakeBus();
  run(5);
  inject({ kind: 'link_down' });
  const recs = run(3);
  const names = new Map(latched().map((e) => [e.name, e]));
  expect(names.get('slave_offline')).toEqual(expect.objectContaining({ bit: bitValue('slave_offline'), axis_mask: ALL }));
  expect(names.get('working_counter')).toEqual(expect.objectContaining({ bit: bitValue('working_counter'), axis_mask: ALL }));
  expect(names.get('safety_chain_open')).toEqual(expect.objectContaining({ bit: bitValue('safety_chain_open'), axis_mask: ALL }));
  const r = recs[0]!;
  expect(u32(r, REC.wkc_actual)).toBe(0);
  expect(u32(r, REC.wkc_expected)).toBe(WKC);
  expect(u32(r, REC.pdo_fresh_axis_mask)).toBe(0);
  expect(u32(r, REC.io_input_valid)).toBe(0);
  const want = bitValue('slave_offline') | bitValue('working_counter') | bitValue('safety_chain_open');
  expect(u32(r, REC.execution_fault_reasons) & want).toBe(want);
  for (let i = 0; i < N; i++) {
    expect(axisU8(r, i, 'slave_al_state')).toBe(0);
    expect(axisU8(r, i, 'slave_operational')).toBe(0);
  }
});

test('a lost slave: slave_offline for its axis alone and working_counter 3 short; reset clears it once the slave is back', async () => {
  const { run, latched, inject, cmd } = await onFakeBus();
  run(5);
  inject({ kind: 'slave_lost', position: 4 });
  const recs = run(2);
  expect(latched()).toEqual([
    expect.objectContaining({ name: 'working_counter', bit: bitValue('working_counter') }),
    expect.objectContaining({ name: 'slave_offline', bit: bitValue('slave_offline'), axis_mask: 1 << 4 }),
  ]);
  const r = recs[0]!;
  expect(u32(r, REC.wkc_actual)).toBe(WKC - 3);
  expect(axisU8(r, 4, 'slave_operational')).toBe(0);
  expect(axisU8(r, 4, 'slave_al_state')).toBe(0);
  expect(axisU8(r, 3, 'slave_operational')).toBe(1);
  expect(u32(r, REC.pdo_fresh_axis_mask)).toBe(ALL & ~(1 << 4));
  inject({ kind: 'clear' });
  run(2);
  cmd('reset_fault');
  const after = run(40).at(-1)!;
  expect(u32(after, REC.execution_fault_reasons)).toBe(0);
  expect(u32(after, REC.wkc_actual)).toBe(WKC);
});

test('a working-counter drop: working_counter latches with wkc_actual one below wkc_expected in telemetry', async () => {
  const { run, latched, inject } = await onFakeBus();
  run(5);
  inject({ kind: 'wkc_drop' });
  const recs = run(2);
  expect(latched()).toEqual([expect.objectContaining({ name: 'working_counter', bit: bitValue('working_counter'), axis_mask: ALL })]);
  expect(u32(recs[0]!, REC.wkc_actual)).toBe(WKC - 1);
  expect(u32(recs[0]!, REC.wkc_expected)).toBe(WKC);
  expect(u32(recs[0]!, REC.execution_fault_reasons) & bitValue('working_counter')).toBe(bitValue('working_counter'));
});

test('a stale cycle: pdo_stale after the driver\'s 3-cycle tolerance plus the core\'s 5 stale cycles, not a cycle earlier', async () => {
  const { run, latched, inject } = await onFakeBus();
  run(5);
  inject({ kind: 'stale_cycle' });
  const early = run(7);
  expect(latched()).toEqual([]);
  expect(early.map((r) => u32(r, REC.pdo_fresh_axis_mask))).toEqual([ALL, ALL, ALL, 0, 0, 0, 0]);
  const recs = run(1);
  expect(latched()).toEqual(
    Array.from({ length: N }, (_, i) => expect.objectContaining({ name: 'pdo_stale', bit: bitValue('pdo_stale'), axis_mask: ((1 << (i + 1)) - 1) })),
  );
  expect(u32(recs[0]!, REC.execution_fault_reasons) & bitValue('pdo_stale')).toBe(bitValue('pdo_stale'));
  expect(axisU8(recs[0]!, 0, 'pdo_fresh')).toBe(0);
  expect(axisU8(recs[0]!, 0, 'slave_operational')).toBe(1); // the slaves are fine; the master stopped
});

test('a slave leaving OP (AL state SAFEOP): slave_offline for its axis, AL state 4 in telemetry', async () => {
  const { run, latched, inject } = await onFakeBus();
  run(5);
  inject({ kind: 'al_state', position: 2, state: AL.safeop });
  const recs = run(2);
  expect(latched()).toEqual([
    expect.objectContaining({ name: 'working_counter' }),
    expect.objectContaining({ name: 'slave_offline', bit: bitValue('slave_offline'), axis_mask: 1 << 2 }),
  ]);
  expect(axisU8(recs[0]!, 2, 'slave_al_state')).toBe(AL.safeop);
  expect(axisU8(recs[0]!, 2, 'slave_operational')).toBe(0);
  expect(u32(recs[0]!, REC.wkc_actual)).toBe(WKC - 2);
});

for (const [what, params, axis, note] of [
  ['an SDO abort at start-up', { sdoAborts: [{ position: 5, index: 0x607d, subindex: 2, abortCode: 0x06090030 }] }, 5, /^ethercat: slave 5 \(axis 5\): start-up SDO 0x607d:02 = -?\d+ refused: SDO abort 0x06090030 \(value range of parameter exceeded\)/],
  ['a PDO mapping mismatch', { startFaults: [{ kind: 'pdo_mapping_mismatch', axis: 7 }] }, 7, /^ethercat: slave 7 \(axis 7\): PDO mapping differs: 0x1a00 entry 5 is 0x60620020, expected 0x60f40020$/],
] as const) {
  test(`${what}: restart_required (bit 11) on that axis from the first cycle, enable refused with pdo_mapping_mismatch, the reason in the start-up notes`, async () => {
    const { run, latched, cmd, ready } = await onFakeBus(params as Record<string, unknown>);
    expect(ready.mappingMismatchMask).toBe(1 << axis);
    expect(ready.startupNotes.some((n) => note.test(n))).toBe(true);
    const recs = run(3);
    expect(latched()).toEqual([expect.objectContaining({ name: 'restart_required', bit: bitValue('restart_required'), axis_mask: 1 << axis })]);
    expect(u32(recs[0]!, REC.execution_fault_reasons)).toBe(bitValue('restart_required'));
    const r = cmd('enable', 1 << axis);
    expect(r?.result).toMatchObject({ Result: 1, Reason: NATIVE_REASON.pdo_mapping_mismatch, AxisMask: 1 << axis });
    // the other axes are unaffected
    expect(cmd('enable', 1 << (axis - 1))?.result.Result).toBe(0);
    expect(u8(recs[0]!, axisOffset(axis) + AX.slave_operational)).toBe(1);
  });
}
