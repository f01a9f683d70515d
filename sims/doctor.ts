// `hil doctor --driver NAME`: checks what a rig needs before a run, and says what is missing in plain words:
// the driver's module loads (node-ethercat and its native part), the machine configuration compiles, the
// EtherCAT master answers and starts the bus, and every configured slave answers at its position with the
// configured vendor and product (and PDO mapping, where the master can read it back). `--driver
// ethercat-fake` runs the same checks against the fake master, with bench deviations to rehearse them.

import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { parseProgramArgs } from './primitives.ts';
import { ProcessImage } from '../drivers/bus.ts';
import { DriverHost } from '../drivers/host.ts';
import { createDriver, DRIVERS, DriverUnavailable } from '../drivers/index.ts';
import { planBus } from '../drivers/ethercat/layout.ts';
import { loadMachine } from './config/compile.ts';
import { busSetupFor } from './core/bus-setup.ts';
import type { CompiledMachine } from './config/types.ts';

export const DOCTOR_USAGE = `usage: hil doctor --driver ethercat|ethercat-fake [--machine FILE] [--io-slave N] [--config-cache DIR]

Checks what a rig needs and prints what is missing in plain words; exit status 0 when the rig is ready,
1 when something is missing, 2 on a usage error.

  --driver NAME          ethercat (node-ethercat on the IgH master) or ethercat-fake (the fake master)
  --machine FILE         machine configuration (default fixtures/machines/nine-axis.json)
  --io-slave N           slave position of the cell I/O terminal (default: after the highest axis position)
  ethercat-fake only, to rehearse what the doctor says:
  --fake-absent POS      no slave is wired at POS (repeatable)
  --fake-identity POS:VENDOR:PRODUCT  the slave at POS is another make (repeatable; numbers or 0x...)
  --fake-no-master       the master cannot be reached
`;

/**
 * What a rig owner needs to know about the binding, as docs/architecture.md "Building node-ethercat" found
 * it (sims/doctor.test.ts holds these words to that section): the published 1.0.5 does not build on this
 * Node, and what to do instead.
 */
const BINDING_FACTS =
  "The published node-ethercat 1.0.5 does not build here: its C++ uses the pre-Node-12 V8 API and does not compile against Node 20's headers " +
  `(this is Node ${process.version}), so \`npm install node-ethercat@1.0.5\` alone does not build. What to do instead: install the IgH EtherCAT master 1.5.2 ` +
  'with its headers and libethercat under /usr/local/etherlab/src/ethercat-1.5.2 (the paths its binding.gyp names), port its C++ (ethercatBindings.cc) to the current V8 API or N-API ' +
  'keeping the functions the driver uses (addSlave, start, activate, readPin, writePin, configSdo, getMasterState, getPins), build that port with node-gyp, ' +
  'and install it in this checkout as node-ethercat (docs/architecture.md, "Building node-ethercat", also lists what a rig build should fix in configSdo and export).';

export interface DoctorReport {
  ok: boolean;
  lines: string[];
}


const hex8 = (v: number) => `0x${v.toString(16).padStart(8, '0')}`;

export async function doctor(o: { driver: string; machine: CompiledMachine; params: Record<string, unknown> }): Promise<DoctorReport> {
  const lines: string[] = [];
  const ok = (s: string) => lines.push(`ok   ${s}`);
  const bad = (s: string) => lines.push(`MISSING  ${s}`);
  let fine = true;
  const setup = busSetupFor(o.machine);
  const plan = planBus(setup, o.params);
  lines.push(`the configuration expects ${plan.length} slaves:`);
  for (const s of plan) lines.push(`  position ${s.position}: ${s.kind === 'axis' ? `axis ${setup.axes[s.axis]!.id} (CiA 402, cyclic synchronous position)` : 'cell I/O terminal'}, vendor ${hex8(s.vendor)}, product ${hex8(s.product)}`);

  // 1. the module
  try {
    await DRIVERS[o.driver]!.load();
    ok(o.driver === 'ethercat' ? 'node-ethercat loads (its native part was built against IgH)' : `the ${o.driver} driver loads`);
  } catch (e) {
    const err = e as DriverUnavailable;
    if (err.code === 'DRIVER_MODULE_MISSING') {
      bad(`node-ethercat is not installed on this machine. It is the EtherCAT master binding the rig needs. ${BINDING_FACTS}`);
    } else if (err.code === 'DRIVER_NOT_BUILT') {
      bad(`node-ethercat is installed but its native part did not build or does not load. ${BINDING_FACTS}`);
    } else bad(`the ${o.driver} driver cannot be loaded: ${err.message}`);
    lines.push(`detail: ${err.message}`);
    return { ok: false, lines };
  }

  // 2. the master and the bus
  let driver;
  try {
    driver = await createDriver(o.driver, { params: o.params });
  } catch (e) {
    bad(`the driver refused its parameters: ${(e as Error).message}`);
    return { ok: false, lines };
  }
  const host = new DriverHost(driver);
  let startup;
  try {
    startup = await host.open(setup);
  } catch (e) {
    const cause = (e as { cause?: Error }).cause ?? (e as Error);
    bad(
      `the EtherCAT master does not answer or cannot start the bus (${cause.message}). Check that the IgH master is running (\`ethercatctl start\` or /etc/init.d/ethercat start), ` +
        'that it is bound to the network interface the rig is cabled to (MASTER0_DEVICE in /etc/sysconfig/ethercat), and that `ethercat slaves` lists the drives.',
    );
    await host.close().catch(() => undefined);
    return { ok: false, lines };
  }
  ok('the EtherCAT master answers and started the bus');
  host.activate();
  const img = new ProcessImage(setup.axes.length);
  let t = process.hrtime.bigint();
  for (let k = 0; k < 3; k++) host.exchange(img, (t += setup.cycleNs));
  const found = driver.identity?.() ?? {};
  const problems = startup.notes.filter((n) => /: slave \d+ \(/.test(n));
  const unchecked = startup.notes.filter((n) => /cannot (list|upload)/.test(n));
  if (problems.length === 0) ok(unchecked.length ? 'no slave was reported missing or different' : 'every slave answers at its position with the configured vendor, product and PDO mapping');
  for (const p of problems) {
    fine = false;
    const m = /slave (\d+) \(([^)]*)\): (.*)$/.exec(p)!;
    const axisIndex = Number(/^axis (\d+)$/.exec(m[2]!)?.[1] ?? -1);
    const what = m[2] === 'I/O terminal' ? 'the cell I/O terminal' : `the drive for axis ${setup.axes[axisIndex]?.id ?? axisIndex}`;
    const why = m[3]!;
    if (why.startsWith('no slave answers')) bad(`nothing answers at bus position ${m[1]}, where ${what} should be. Check the cabling order and that the slave is powered; positions count from the master along the cable.`);
    else if (why.startsWith('found vendor')) bad(`bus position ${m[1]} holds a slave of another make than ${what} in the configuration (${why}). Either the cabling order differs from the configuration or the drive layer (document 3 \`drives\`) names the wrong device.`);
    else if (why.startsWith('PDO mapping')) bad(`${what} at position ${m[1]} uses another PDO mapping than the profile (${why.slice('PDO mapping differs: '.length)}). Load the drive's default CSP mapping or set explicit PDO configuration.`);
    else bad(`${what} at position ${m[1]}: ${why}`);
  }
  for (const u of unchecked) lines.push(`note ${u.replace(/^ethercat: /, '')}`);
  const online = [...img.online].filter((x) => x === 1).length;
  if (img.wkcActual < img.wkcExpected || online < setup.axes.length) {
    fine = false;
    bad(`in cyclic exchange ${online} of ${setup.axes.length} axis slaves are operational and the working counter is ${img.wkcActual} of ${img.wkcExpected}.`);
  } else ok(`cyclic exchange: all ${setup.axes.length} axis slaves operational, working counter ${img.wkcActual} of ${img.wkcExpected}`);
  if (!img.safetyChainClosed) lines.push('note the E-stop chain reads open (the bench box closes it for a run)');
  if (Array.isArray((found as { found_slaves?: unknown[] }).found_slaves)) {
    const extra = ((found as { found_slaves: Array<{ position: number }> }).found_slaves).filter((f) => !plan.some((s) => s.position === f.position));
    for (const f of extra) lines.push(`note a slave at position ${f.position} is not in the configuration (list it in bus.unused_slaves)`);
  }
  await host.close();
  lines.push(fine ? 'the rig is ready for `hil run --target rig`' : 'the rig is not ready: fix what is listed above, then run `hil doctor` again');
  return { ok: fine, lines };
}

const parseNum = (s: string) => (s.startsWith('0x') ? Number.parseInt(s.slice(2), 16) : Number(s));

export async function doctorMain(argv: string[], defaultMachine: string): Promise<number> {
  const parsed = parseProgramArgs(
    {
      args: argv,
      options: {
        driver: { type: 'string' },
        machine: { type: 'string' },
        'config-cache': { type: 'string' },
        'io-slave': { type: 'string' },
        'fake-absent': { type: 'string', multiple: true },
        'fake-identity': { type: 'string', multiple: true },
        'fake-no-master': { type: 'boolean' },
      },
    },
    DOCTOR_USAGE,
  );
  if (typeof parsed === 'number') return parsed;
  const a = parsed.values;
  const driver = a.driver;
  if (driver !== 'ethercat' && driver !== 'ethercat-fake') {
    process.stderr.write(`hil doctor checks an EtherCAT rig: --driver ethercat or ethercat-fake\n${DOCTOR_USAGE}`);
    return 2;
  }
  const fakeOpts = a['fake-absent'] || a['fake-identity'] || a['fake-no-master'];
  if (fakeOpts && driver !== 'ethercat-fake') {
    process.stderr.write('--fake-* options apply to --driver ethercat-fake only\n');
    return 2;
  }
  const params: Record<string, unknown> = {};
  if (a['io-slave'] !== undefined) {
    if (!/^\d{1,5}$/.test(a['io-slave']) || Number(a['io-slave']) > 65535) {
      process.stderr.write('--io-slave must be a slave position 0..65535\n');
      return 2;
    }
    params.ioSlavePosition = Number(a['io-slave']);
  }
  if (driver === 'ethercat-fake') {
    params.cycle = 'lockstep';
    const absent = (a['fake-absent'] ?? []).map(parseNum);
    const identity = (a['fake-identity'] ?? []).map((s) => s.split(':').map(parseNum));
    if (!absent.every((x) => Number.isSafeInteger(x) && x >= 0) || !identity.every((x) => x.length === 3 && x.every((y) => Number.isSafeInteger(y) && y >= 0))) {
      process.stderr.write('--fake-absent POS and --fake-identity POS:VENDOR:PRODUCT take non-negative integers\n');
      return 2;
    }
    if (absent.length) params.absent = absent;
    if (identity.length) params.identity = identity.map(([position, vendor, product]) => ({ position, vendor, product }));
    if (a['fake-no-master']) params.noMaster = true;
  }
  let machine;
  try {
    machine = await loadMachine(resolve(a.machine ?? defaultMachine), resolve(a['config-cache'] ?? join(tmpdir(), 'cell-hil-config')));
  } catch (e) {
    const err = e as Error & { code?: string };
    process.stderr.write(`machine configuration refused: ${err.code ?? 'error'}: ${err.message}\n`);
    return 2;
  }
  const r = await doctor({ driver, machine, params });
  process.stdout.write(r.lines.join('\n') + '\n');
  return r.ok ? 0 : 1;
}
