// `hil doctor`: what it says about a missing module, a master that does not answer, slaves that do not
// match the configuration, and a rig that is ready (rehearsed on the fake master).

import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { compileMachine } from './config/compile.ts';
import { doctor } from './doctor.ts';

const machine = { ...compileMachine(readFileSync(new URL('../fixtures/machines/bench-two-axis.json', import.meta.url), 'utf8')).machine, dir: '' };

// docs/architecture.md "Building node-ethercat" is what was found about the published binding; the
// doctor's words are held to it: a rig owner following them must not be sent down a build that fails.
const ARCH = readFileSync(new URL('../docs/architecture.md', import.meta.url), 'utf8');
const BUILDING = ARCH.slice(ARCH.indexOf('### Building node-ethercat'), ARCH.indexOf('### Running on a rig'));

test('docs/architecture.md still says what the doctor repeats (the facts the next test holds the doctor to)', () => {
  const flat = BUILDING.replace(/\s+/g, ' ');
  expect(flat).toContain('node-ethercat 1.0.5');
  expect(flat).toContain('IgH EtherCAT master 1.5.2');
  expect(flat).toContain('/usr/local/etherlab/src/ethercat-1.5.2/include');
  expect(flat).toContain("it does not compile against Node 20's headers without porting to the current V8 API or N-API");
});

test('node-ethercat absent: says the published 1.0.5 does not build on Node 20, what to do instead (IgH 1.5.2, the port to the current V8 API or N-API), and stops there', async () => {
  const r = await doctor({ driver: 'ethercat', machine, params: {} });
  expect(r.ok).toBe(false);
  const missing = r.lines.filter((l) => l.startsWith('MISSING'));
  expect(missing).toHaveLength(1);
  const m = missing[0]!;
  expect(m).toMatch(/^MISSING {2}node-ethercat is not installed on this machine\. /);
  // what was found
  expect(m).toContain('node-ethercat 1.0.5');
  expect(m).toContain("does not compile against Node 20's headers");
  expect(m).toContain(`this is Node ${process.version}`);
  // what to do instead
  expect(m).toContain('IgH EtherCAT master 1.5.2');
  expect(m).toContain('/usr/local/etherlab/src/ethercat-1.5.2');
  expect(m).toContain('port its C++ (ethercatBindings.cc) to the current V8 API or N-API');
  for (const f of ['addSlave', 'start', 'activate', 'readPin', 'writePin', 'configSdo', 'getMasterState', 'getPins']) expect(m).toContain(f);
  expect(m).toContain('docs/architecture.md, "Building node-ethercat"');
  // never the plain install as the way to a working rig
  expect(m).not.toMatch(/then run `npm install node-ethercat@1\.0\.5`/);
  expect(m).toContain('`npm install node-ethercat@1.0.5` alone does not build');
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
