// `hil doctor`: what it says about a missing module, a master that does not answer, slaves that do not
// match the configuration, and a rig that is ready (rehearsed on the fake master).

import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { compileMachine } from './config/compile.ts';
import { doctor } from './doctor.ts';

const machine = { ...compileMachine(readFileSync(new URL('../fixtures/machines/bench-two-axis.json', import.meta.url), 'utf8')).machine, dir: '' };

test('node-ethercat absent: says it is not installed and how to get it, and stops there', async () => {
  const r = await doctor({ driver: 'ethercat', machine, params: {} });
  expect(r.ok).toBe(false);
  const missing = r.lines.filter((l) => l.startsWith('MISSING'));
  expect(missing).toEqual([expect.stringMatching(/^MISSING {2}node-ethercat is not installed on this machine\. .*npm install node-ethercat@1\.0\.5/)]);
  expect(r.lines.some((l) => l.startsWith('ok'))).toBe(false); // nothing further was tried
});

test('the configuration read from the machine: the slaves it expects, with the drive layer identity', async () => {
  const r = await doctor({ driver: 'ethercat-fake', machine, params: { cycle: 'lockstep' } });
  expect(r.lines.slice(0, 4)).toEqual([
    'the configuration expects 3 slaves:',
    '  position 0: axis R1 (CiA 402, cyclic synchronous position), vendor 0x00000539, product 0x00001234',
    '  position 1: axis X1 (CiA 402, cyclic synchronous position), vendor 0x00000539, product 0x00001234',
    '  position 2: cell I/O terminal, vendor 0x00000000, product 0x00000000',
  ]);
  expect(r.ok).toBe(true);
  expect(r.lines.at(-1)).toBe('the rig is ready for `hil run --target rig`');
  expect(r.lines).toContain('ok   cyclic exchange: all 2 axis slaves operational, working counter 9 of 9');
});

test('no master: says the master does not answer and what to check', async () => {
  const r = await doctor({ driver: 'ethercat-fake', machine, params: { cycle: 'lockstep', noMaster: true } });
  expect(r.ok).toBe(false);
  expect(r.lines.filter((l) => l.startsWith('MISSING'))).toEqual([
    expect.stringMatching(/^MISSING {2}the EtherCAT master does not answer or cannot start the bus \(start: Cannot retrieve master\. Is ethercat running and are you root\?\)\. Check that the IgH master is running/),
  ]);
});

test('slaves that do not match: nothing at a position, another make at a position, each named with its axis', async () => {
  const r = await doctor({ driver: 'ethercat-fake', machine, params: { cycle: 'lockstep', absent: [1], identity: [{ position: 0, vendor: 0x539, product: 0x9999 }] } });
  expect(r.ok).toBe(false);
  expect(r.lines.filter((l) => l.startsWith('MISSING'))).toEqual([
    'MISSING  bus position 0 holds a slave of another make than the drive for axis R1 in the configuration (found vendor 0x00000539 product 0x00009999, configured vendor 0x00000539 product 0x00001234). Either the cabling order differs from the configuration or the drive layer (document 3 `drives`) names the wrong device.',
    'MISSING  nothing answers at bus position 1, where the drive for axis X1 should be. Check the cabling order and that the slave is powered; positions count from the master along the cable.',
    'MISSING  in cyclic exchange 0 of 2 axis slaves are operational and the working counter is 3 of 9.',
  ]);
});
