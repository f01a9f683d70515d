// Cells, target selection and target fencing of the OLP server (document 3 part 2 "Target fencing",
// part 4 /targets, /targets/select, /dense-execution/cells and /target, part 7 the cell_* refusals).
// Two real cells: the file's stack reached over its Unix socket (cell-a) and a stack with a remote
// listener reached over mutual TLS with a client certificate (cell-b); the other catalogue entries
// describe those same services wrongly (another mode, pair, configuration, backend or description),
// name a socket nobody serves, or a socket that accepts and does not answer. That nothing reaches the
// robot after a fence refusal is read from the control services themselves.

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ControlClient } from '../../harness/clients/control.ts';
import { eventCursor, eventsSince } from '../../harness/clients/events.ts';
import { sealProgram } from '../../harness/clients/weldplan.ts';
import { stringifyExact } from '../../harness/oracle/json.ts';
import { baseProgram } from '../planner/toolkit.ts';
import { covers, describe, expect, inProfile, needsMotion, profile, sharedRemote, type Description } from '../../harness/fixture.ts';
import type { RemoteStack } from '../../harness/targets/remote.ts';
import { targetFromEnv, type OlpCellSpec, type OlpSpec, type Target } from '../../harness/targets/index.ts';
import { beforeAll, afterAll } from 'vitest';
import { CellLine, discoverCells, expectMachineError, fence, olpTest as test, registerCell, released, useOlp, type Olp, type OlpReply } from './toolkit.ts';

const URDF_SHA = 'sha256:' + createHash('sha256').update(readFileSync(new URL('../../fixtures/robots/sim-nine-axis.urdf', import.meta.url))).digest('hex');
const MODEL = 'sim-nine-axis';
const CAL = Buffer.from('planning calibration of cell-a\n');

let B: RemoteStack;
let bDescribe: Record<string, any>;
let bCreds: { host: string; port: number; cert: string; key: string; ca: string };
// A socket that accepts and, while `hang` is set, never answers (a cell stuck mid-handshake): the suite's
// own, on every target (on someone else's server it is registered as a cell, see world()).
// Made when the file's tests start, not when vitest collects it: a run that collects the file and runs none
// of its tests (a --covers or --last-failed selection) runs no afterAll to remove it.
let dir = '';
let hangSocket = '';
let goneSocket = '';
let hang = false;
const held: Socket[] = [];
const hangServer: Server = createServer((s) => (hang ? held.push(s) : s.destroy()));
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hil-olp-cells-'));
  hangSocket = join(dir, 'hang.sock');
  goneSocket = join(dir, 'nobody.sock');
  return new Promise<void>((resolve, reject) => {
    hangServer.once('error', reject);
    hangServer.listen(hangSocket, () => resolve());
  });
});
afterAll(async () => {
  for (const s of held.splice(0)) s.destroy();
  if (hangServer.listening) await new Promise<void>((r) => hangServer.close(() => r()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// The reference server only: a second stack with a remote listener, reached over mutual TLS. Someone
// else's server (the external target) brings its own cells, so the file does not ask for the stack there
// (sharedRemote would skip every test of the file).
const remote: { readonly cannot: string | undefined } = targetFromEnv().name === 'external' ? { cannot: 'the external target brings its own cells' } : sharedRemote(async (open) => {
  // The internet link profile: a 3 s lease ceiling, so the OLP server's grant on this TLS cell survives a
  // loaded machine between its renewals (the lan ceiling is 500 ms).
  B = await open({ pairId: 'cell-b', args: ['--machine', fileURLToPath(new URL('../../fixtures/machines/nine-axis-internet.json', import.meta.url))] });
  const d = await B.local().describe();
  bDescribe = d.reply.data as Record<string, any>;
  bCreds = await B.creds('olp-server');
});

/** The catalogue: the two real cells and the wrongly described ones. */
function catalogue(target: Target, d: Description): OlpSpec {
  const a = { socket: target.address };
  const pinA = { pair_id: d.binding.pair_id, configuration_sha256: String((d as Record<string, unknown>).configuration_sha256) };
  const base = { model_id: MODEL, robot_description_sha256: URDF_SHA, mode: 'simulation', backend: 'core' };
  const cells: OlpCellSpec[] = [
    { cell_id: 'cell-a', ...base, ...pinA, control: a, calibration: CAL },
    { cell_id: 'cell-b', ...base, pair_id: 'cell-b', configuration_sha256: String(bDescribe.configuration_sha256), control: { url: `https://${bCreds.host}:${bCreds.port}`, cert: bCreds.cert, key: bCreds.key, ca: bCreds.ca } },
    { cell_id: 'cell-live', ...base, ...pinA, mode: 'live', control: a },
    { cell_id: 'cell-other-pair', ...base, ...pinA, pair_id: 'someone-else', control: a },
    { cell_id: 'cell-other-config', ...base, ...pinA, configuration_sha256: 'f'.repeat(64), control: a },
    { cell_id: 'cell-unpinned', ...base, pair_id: d.binding.pair_id, control: a },
    { cell_id: 'cell-ros', ...base, ...pinA, backend: 'ros', control: a },
    { cell_id: 'cell-bad-desc', ...base, ...pinA, robot_description_sha256: 'sha256:' + '0'.repeat(64), control: a },
    { cell_id: 'cell-gone', ...base, ...pinA, control: { socket: goneSocket } },
    { cell_id: 'cell-hang', ...base, ...pinA, control: { socket: hangSocket } },
  ];
  return { cells, leaseMs: 3_000 };
}

/**
 * The cells a wrongly described entry of the catalogue stands for, by the refusal it provokes; and 'line',
 * not described wrongly: the run's control service itself, reached through a CellLine the suite controls.
 */
type Wrong = 'live' | 'other-pair' | 'other-config' | 'unpinned' | 'ros' | 'bad-desc' | 'gone' | 'hang' | 'line';

/**
 * What a test of this file works with. On the sim target: the catalogue above, the file's stack as cell-a
 * and the remote stack as cell-b. On someone else's server: the cells it lists (GET /targets), the first
 * usable one whose control service is the run's (--socket, or the facts file's) as `a`, another usable
 * one as `b`; a wrongly described cell is registered at run time through /dense-execution/cells (the
 * run's control service described wrongly in one field) when the server takes the registry body of
 * docs/profile.md, and a test that needs one it cannot have skips with the reason.
 */
interface World {
  o: Olp;
  external: boolean;
  a: string;
  model: string;
  aClient: ControlClient;
  b: string | undefined;
  bClient: ControlClient | undefined;
  /** Axis ids of cell b (its Describe), when known. */
  bAxes: string[] | undefined;
  /** The id of a cell described wrongly this way, or the reason there is none. */
  wrong(kind: Wrong): Promise<{ id: string } | { none: string }>;
}

const SIM_WRONG: Record<Wrong, string> = { live: 'cell-live', 'other-pair': 'cell-other-pair', 'other-config': 'cell-other-config', unpinned: 'cell-unpinned', ros: 'cell-ros', 'bad-desc': 'cell-bad-desc', gone: 'cell-gone', hang: 'cell-hang', line: 'cell-b' };

async function world(olps: { open: (n: string, s: () => OlpSpec) => Promise<Olp | undefined> }, skip: (c: boolean, n?: string) => void, target: Target, d: Description): Promise<World> {
  const external = target.name === 'external';
  if (!external) skip(remote.cannot !== undefined, remote.cannot);
  const o = useOlp({ skip }, await olps.open('catalogue', () => (external ? {} : catalogue(target, d))));
  if (o.endpoint.configured) {
    return { o, external: false, a: 'cell-a', model: MODEL, aClient: target.client(), b: 'cell-b', bClient: B.local(), bAxes: (bDescribe.axes as any[]).map((x) => String(x.id)), wrong: async (k) => ({ id: SIM_WRONG[k] }) };
  }
  const found = await discoverCells(o, target, d);
  skip(!found.catalogue, 'the OLP server has no cell catalogue (an unknown cell\'s selection is not 409 cell_id_unknown): selection and fencing need one (document 3 part 2)');
  const mine = found.usable.filter((c) => c.control);
  skip(mine.length === 0, `none of the cells the OLP server lists (${found.cells.map((c) => c.cell_id).join(', ') || 'none'}) is known to be the run's control service: name its control_socket in the OLP facts file (README "Your own OLP server")`);
  const a = mine[0]!;
  const b = found.usable.find((c) => c !== a && c.control) ?? found.usable.find((c) => c !== a);
  let bAxes: string[] | undefined;
  if (b?.control) bAxes = (((await b.control.describe()).reply.data as Record<string, any>).axes as any[]).map((x) => String(x.id));
  const made = new Map<Wrong, Promise<{ id: string } | { none: string }>>();
  const backend = String((d as Record<string, unknown>).backend ?? 'simulation');
  const register = (k: Wrong): Promise<{ id: string } | { none: string }> => {
    const listed = (reason: string) => found.cells.find((c) => !c.reachable && c.reason === reason);
    if (k === 'unpinned') {
      // Not registrable (a cell without a pin is not commissioned): only a catalogue entry can be one.
      const c = listed('cell_configuration_missing');
      return Promise.resolve(c ? { id: c.cell_id } : { none: 'the catalogue lists no cell without a configuration pin (reason cell_configuration_missing), and the registry refuses one by design' });
    }
    const id = `hil-${k}-${process.pid}`;
    const base: Record<string, unknown> = { cell_id: id, model_id: a.model_id, control: { socket: target.address }, mode: backend, backend: 'core', pair_id: d.binding.pair_id, configuration_sha256: d.binding.configuration_sha256 };
    if (typeof a.entry.robot_description_sha256 === 'string' && a.entry.robot_description_sha256) base.robot_description_sha256 = a.entry.robot_description_sha256;
    const edits: Record<Exclude<Wrong, 'unpinned'>, Record<string, unknown>> = {
      live: { mode: backend === 'live' ? 'simulation' : 'live' },
      'other-pair': { pair_id: 'someone-else' },
      'other-config': { configuration_sha256: 'f'.repeat(64) },
      ros: { backend: 'ros' },
      'bad-desc': { robot_description_sha256: 'sha256:' + '0'.repeat(64) },
      gone: { control: { socket: goneSocket } },
      hang: { control: { socket: hangSocket } },
      line: { control: { socket: join(dir, 'line.sock') } },
    };
    return registerCell(o, { ...base, ...edits[k] }).then((why) => (why === undefined ? { id } : { none: why }));
  };
  return {
    o,
    external: true,
    a: a.cell_id,
    model: a.model_id!,
    aClient: a.control!,
    b: b?.cell_id,
    bClient: b?.control,
    bAxes,
    wrong: (k) => {
      let p = made.get(k);
      if (!p) made.set(k, (p = register(k)));
      return p;
    },
  };
}

/** The id of a wrongly described cell, or a skip with the reason. */
async function wrongCell(w: World, k: Wrong, skip: (c: boolean, n?: string) => void): Promise<string> {
  const r = await w.wrong(k);
  skip('none' in r, 'none' in r ? `needs a cell described wrongly (${k}): ${r.none}` : undefined);
  return (r as { id: string }).id;
}

/** The current selection, from the status fields part 2 names for the fence (status.target). */
async function selection(o: Olp): Promise<{ cell: string; gen: bigint }> {
  const s = (await o.client.get('/dense-execution/status')).json?.target;
  return { cell: s.cell_id, gen: BigInt(s.selection_generation) };
}

async function select(o: Olp, cell_id: string, model_id = MODEL): Promise<OlpReply> {
  return o.client.post('/targets/select', { cell_id, model_id });
}

/** What the control service shows of its grant (generation moves with every acquire). */
async function grantOf(c: ControlClient): Promise<{ active: boolean; generation: bigint; home_epoch: bigint }> {
  const s = (await c.status()).reply.data as Record<string, any>;
  return { active: s.grant.active, generation: BigInt(s.grant.generation), home_epoch: BigInt(s.core.home_epoch) };
}

describe('targets and selection', () => {
  test(
    'GET /targets lists every catalogued cell with its reachability and the documented reasons',
    covers('olp:route.targets', 'olp:targets.unreachable_reasons'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      const wrong = { live: await w.wrong('live'), gone: await w.wrong('gone'), hang: await w.wrong('hang'), unpinned: await w.wrong('unpinned') };
      const r = await w.o.client.get('/targets');
      expect(r.status, r.text).toBe(200);
      const by = Object.fromEntries((r.json?.targets as any[]).map((t) => [t.cell_id, t]));
      // Documented: the list names the cells (part 4), and an entry may report its backend unreachable with
      // a reason such as cell_configuration_missing, cell_mode_mismatch or cell_unreachable (part 7).
      for (const id of [w.a, ...(w.b ? [w.b] : [])]) expect(by[id], `${id} in ${r.text.slice(0, 300)}`).toBeDefined();
      const reasons: Array<[keyof typeof wrong, string]> = [['live', 'cell_mode_mismatch'], ['unpinned', 'cell_configuration_missing'], ['gone', 'cell_unreachable'], ['hang', 'cell_unreachable']];
      for (const [k] of reasons) if ('id' in wrong[k]) expect(by[(wrong[k] as { id: string }).id], k).toBeDefined();
      // The field names (reachable, reason) are the reference server's (docs/profile.md "OLP server: cell catalogue").
      await inProfile('profile:olp.catalogue', () => {
        expect([by[w.a].reachable, w.b ? by[w.b].reachable : true]).toEqual([true, true]);
        for (const [k, reason] of reasons) {
          const x = wrong[k];
          if ('id' in x) expect([by[x.id].reachable, by[x.id].reason], k).toEqual([false, reason]);
        }
      });
    },
  );

  test.for([
    ['an unknown cell', 'cell_id_unknown', 'nope'],
    ['another model', 'cell_model_mismatch', 'model'],
    ['a backend the server does not drive', 'cell_backend_unavailable', 'ros'],
    ['a description not in the robot store', 'cell_description_invalid', 'bad-desc'],
    ['another mode', 'cell_mode_mismatch', 'live'],
    ['another pair', 'cell_backend_mismatch', 'other-pair'],
    ['another configuration pin', 'cell_configuration_mismatch', 'other-config'],
    ['no configuration pin', 'cell_configuration_mismatch', 'unpinned'],
    ['a control service nobody serves', 'cell_unreachable', 'gone'],
  ] as const)('selecting a cell with %s is refused 409 %s and the selection stays', covers('olp:error.cell_id_unknown', 'olp:error.cell_model_mismatch', 'olp:error.cell_backend_unavailable', 'olp:error.cell_description_invalid', 'olp:error.cell_mode_mismatch', 'olp:error.cell_backend_mismatch', 'olp:error.cell_configuration_mismatch', 'olp:error.cell_unreachable', 'olp:errors.machine_shape'), async ([, code, kind], { olps, skip, target, description }) => {
    const w = await world(olps, skip, target, description);
    const cell = kind === 'nope' ? `cell-nope-${process.pid}` : kind === 'model' ? w.a : await wrongCell(w, kind, skip);
    const model = kind === 'model' ? 'another-robot' : w.model;
    // The valid twin: a good cell with its own model is selected (the refusal is for the rule under test).
    expect((await select(w.o, w.a, w.model)).status).toBe(200);
    const before = await selection(w.o);
    const r = await select(w.o, cell, model);
    expectMachineError(r, 409, code);
    expect(await selection(w.o)).toEqual(before);
  });

  test(
    'selecting one cell then another: each answers as itself, the generation moves by one',
    covers('olp:route.targets', 'field:OlpTargetSelectRequest.cell_id', 'field:OlpTargetSelectRequest.model_id', 'olp:route.dense_execution_observe'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      skip(w.b === undefined, 'the OLP server lists one usable cell: a switch needs two');
      const o = w.o;
      // From a cleared selection, so that each select below is a change.
      expect((await o.client.post('/dense-execution/target', { cell: '' })).status).toBe(200);
      const g0 = (await selection(o)).gen;
      const a = await select(o, w.a, w.model);
      expect(a.status, a.text).toBe(200);
      // status.target is what part 2 names for the fence; select's own reply body is not shown.
      expect(await selection(o)).toEqual({ cell: w.a, gen: g0 + 1n });
      await inProfile('profile:olp.catalogue', () => expect(a.json?.selected).toEqual({ cell_id: w.a, selection_generation: g0 + 1n }));
      await inProfile('profile:olp.execution_bodies', async () => expect((await o.client.get('/dense-execution/cell')).json?.pair_id).toBe(description.binding.pair_id));
      const b = await select(o, w.b!, (await discoveredModel(w, w.b!)) ?? w.model);
      expect(b.status, b.text).toBe(200);
      expect(await selection(o)).toEqual({ cell: w.b, gen: g0 + 2n });
      await inProfile('profile:olp.catalogue', () => expect(b.json?.selected).toEqual({ cell_id: w.b, selection_generation: g0 + 2n }));
      if (!w.external) {
        const cell = (await o.client.get('/dense-execution/cell')).json;
        expect([cell.cell_id, cell.pair_id, cell.transport]).toEqual(['cell-b', 'cell-b', 'https']);
      }
      for (const route of ['/dense-execution/capabilities', '/dense-execution/status', '/dense-execution/cell', '/dense-execution/telemetry/window?window_ms=500']) {
        const x = await o.client.get(route);
        expect(x.status, `${route}: ${x.text.slice(0, 300)}`).toBe(200);
      }
      await inProfile('profile:olp.execution_bodies', async () => {
        const caps = (await o.client.get('/dense-execution/capabilities')).json;
        expect((caps?.capabilities ?? []).map((c: any) => c?.name)).toContain('start_program');
      });
      // Telemetry of the selected cell, decoded by the OLP server.
      if (w.bAxes) {
        const axes = w.bAxes;
        await inProfile('profile:olp.telemetry_window', async () => {
          const x = await o.client.get('/dense-execution/telemetry/window?window_ms=500');
          expect(x.json?.axes?.map((v: any) => v?.id)).toEqual(axes);
        });
      }
    },
  );

  test('POST /dense-execution/target selects by {cell}; the empty string clears the selection', covers('olp:route.dense_execution_cells', 'field:OlpDenseTargetRequest.cell'), async ({ olps, skip, target, description }) => {
    const w = await world(olps, skip, target, description);
    const o = w.o;
    expect((await o.client.post('/dense-execution/target', { cell: '' })).status).toBe(200);
    const g = (await selection(o)).gen;
    const r = await o.client.post('/dense-execution/target', { cell: w.a });
    expect(r.status, r.text).toBe(200);
    expect(await selection(o)).toEqual({ cell: w.a, gen: g + 1n });
    expect((await o.client.post('/dense-execution/target', { cell: '' })).status).toBe(200);
    expect(await selection(o)).toEqual({ cell: '', gen: g + 2n });
    await inProfile('profile:olp.execution_bodies', async () => expect((await o.client.get('/dense-execution/status')).json?.connected).toBe(false));
  });

  test(
    'the cell registry: a cell without a configuration pin is not commissioned, a pinned id cannot be re-pinned',
    covers('olp:route.dense_execution_cells', 'olp:error.cell_not_commissioned', 'olp:error.cell_binding_pinned'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      const o = w.o;
      const ids = (r: OlpReply) => ((r.json?.cells ?? []) as any[]).map((c) => c?.cell_id);
      const listed = await o.client.get('/dense-execution/cells');
      expect(listed.status, listed.text).toBe(200);
      await inProfile('profile:olp.cells_registry', () => expect(ids(listed)).toContain(w.a));
      const id = `cell-new-${process.pid}`;
      // The registry body is the reference server's (docs/profile.md "OLP server: cell registry").
      const cell = { cell_id: id, model_id: w.model, control: { socket: target.address }, pair_id: description.binding.pair_id };
      const pinned = { ...cell, configuration_sha256: description.binding.configuration_sha256 };
      // The valid twin first: the same cell with its pin is registered; the refusal below is for the pin alone.
      const made = await o.client.post('/dense-execution/cells', pinned);
      skip(w.external && made.status !== 200, `the server does not register a cell from the body of docs/profile.md "OLP server: cell registry" (${made.status} ${made.text.slice(0, 160)})`);
      try {
        expect(made.status, made.text).toBe(200);
        await inProfile('profile:olp.cells_registry', () => expect(made.json?.created).toBe(true));
        expectMachineError(await o.client.post('/dense-execution/cells', { ...cell, cell_id: `${id}-x` }), undefined, 'cell_not_commissioned');
        await inProfile('profile:olp.cells_registry', async () => expect((await o.client.post('/dense-execution/cells', pinned)).json?.created).toBe(false));
        expectMachineError(await o.client.post('/dense-execution/cells', { ...pinned, configuration_sha256: 'e'.repeat(64) }), undefined, 'cell_binding_pinned');
        await inProfile('profile:olp.cells_registry', async () => expect(ids(await o.client.get('/dense-execution/cells'))).toContain(id));
      } finally {
        const del = await o.client.raw('DELETE', `/dense-execution/cells/${id}`);
        expect(del.status, del.text).toBe(200);
      }
      await inProfile('profile:olp.cells_registry', async () => expect(ids(await o.client.get('/dense-execution/cells'))).not.toContain(id));
    },
  );

  test('registry labels and statuses are as docs/profile.md says', profile('profile:olp.cells_registry', 'profile:olp.catalogue'), async ({ olps, skip, target, description }) => {
    const w = await world(olps, skip, target, description);
    const o = w.o;
    expectMachineError(await o.client.post('/dense-execution/cells', { cell_id: 'x', model_id: w.model, control: { socket: '/nowhere' } }), 409, 'cell_not_commissioned');
    expectMachineError(await o.client.raw('DELETE', `/dense-execution/cells/${w.a}`), 409, 'cell_binding_pinned');
    expectMachineError(await o.client.raw('DELETE', '/dense-execution/cells/no-such'), 404, 'cell_id_unknown');
  });

  test('one switch at a time: a selection while another is in progress is refused 409 cell_switch_busy', covers('olp:error.cell_switch_busy'), async ({ olps, skip, target, description }) => {
    const w = await world(olps, skip, target, description);
    const o = w.o;
    const hangCell = await wrongCell(w, 'hang', skip);
    hang = true;
    try {
      const stuck = select(o, hangCell, w.model);
      for (let i = 0; i < 100 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(held.length).toBeGreaterThan(0);
      expectMachineError(await select(o, w.a, w.model), 409, 'cell_switch_busy');
      hang = false;
      for (const s of held.splice(0)) s.destroy();
      expectMachineError(await stuck, 409, 'cell_unreachable');
    } finally {
      hang = false;
    }
    // The same selection once the switch is over: admitted.
    expect((await select(o, w.a, w.model)).status).toBe(200);
  });

  test(
    'machine_planning_calibration_base64 is not read while a cell is connected: the cell\'s calibration is used',
    covers('olp:weld_plan.calibration_when_disconnected'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      // The cell's calibration is known only where the harness configured it.
      skip(w.external, 'needs a cell whose planning calibration the harness configured (the catalogue file is docs/profile.md "OLP server: cell catalogue"); how a plan shows which calibration it used is not shown either');
      const o = w.o;
      expect((await select(o, 'cell-a')).status).toBe(200);
      const program = JSON.parse(readFileSync(new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url), 'utf8'));
      const r = await o.client.post('/weld-plan', { program, tooling: { tool_id: 't' }, step_base64: '', workpiece_absent: true, cell_id: 'cell-a', program_id: 'line_weld_demo', machine_planning_calibration_base64: Buffer.from('ignored').toString('base64') });
      expect(r.status, r.text.slice(0, 300)).toBe(200);
      expect(r.json?.planning_calibration).toEqual({ sha256: 'sha256:' + createHash('sha256').update(CAL).digest('hex'), source: 'target' });
    },
  );
});

describe('conventions on every route (part 2)', () => {
  test(
    'unknown request fields are ignored on every OLP route that takes a body: the same request with one more field is answered the same',
    covers('olp:conventions.unknown_fields_ignored'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      const o = w.o;
      expect((await select(o, w.a, w.model)).status).toBe(200);
      const s = await selection(o);
      const f = fence(s.gen, s.cell);
      const robots = (await o.client.get('/robots')).json?.robots as any[] | undefined;
      const robot = robots?.find((r) => typeof r?.model_id === 'string' && typeof r?.robot_description_sha256 === 'string');
      const program = sealProgram(baseProgram() as Record<string, any>);
      const plan = { program, tooling: { tool_id: 'torch-olp' }, step_base64: '', workpiece_absent: true, cell_id: w.a, program_id: 'line_weld_demo', program_digest: program.program_digest };
      const step_base64 = readFileSync(new URL('../../fixtures/step/butt-joint.step', import.meta.url)).toString('base64');
      const axis = String((description.axes as any[])[0]?.id ?? 'J1');
      const jog = { target_id: w.a, session_id: 'unknown-fields', revision: 1, axis, direction: 1, fraction: 0.1 };
      const registration = { cell_id: `cell-fields-${process.pid}`, model_id: w.model, control: { socket: target.address }, pair_id: description.binding.pair_id, configuration_sha256: description.binding.configuration_sha256 };
      // Every route of part 4 with a JSON body, each with a body a client would send; the PUT of /programs
      // carries a program document, whose own rules refuse unknown node keys (part 2), so it is not here.
      const table: Array<[string, string, unknown, Record<string, string>?]> = [
        ['POST', '/robots/capture-model', robot ? { model_id: robot.model_id, robot_description_sha256: robot.robot_description_sha256 } : { model_id: 'none', robot_description_sha256: 'sha256:' + '0'.repeat(64) }],
        ['POST', '/cadquery/topology', { operation: 'extract_topology', step_base64 }],
        ['POST', '/seam', { operation: 'detect_joints', step_base64 }],
        ['POST', '/weld-plan', plan],
        ['POST', '/weld-plan/export', plan],
        ['POST', '/targets/select', { cell_id: w.a, model_id: w.model }],
        ['POST', '/dense-execution/target', { cell: w.a }],
        ['POST', '/dense-execution/cells', registration],
        ['POST', '/dense-execution/heartbeat', {}],
        ['POST', '/dense-execution/arm', { armed: false }],
        ['POST', '/dense-execution/stop', {}],
        ['POST', '/dense-execution/pause', {}],
        ['POST', '/dense-execution/home', {}, f],
        ['POST', '/dense-execution/load', { trajectory_digest: 'sha256:' + '1'.repeat(64) }, f],
        ['POST', '/dense-execution/play', {}, f],
        ['POST', '/dense-execution/move', { points: [[0]] }, f],
        ['POST', '/dense-execution/jog/begin', jog, f],
        ['POST', '/dense-execution/jog/update', { ...jog, revision: 2 }, f],
        ['POST', '/dense-execution/jog/end', { session_id: 'unknown-fields' }],
        ['POST', '/dense-execution/jog/stop', {}],
        ['POST', '/dense-execution/cartesian/start', { session_id: 'c', frame: 'world' }, f],
        ['POST', '/dense-execution/cartesian/intent', { session_id: 'c', revision: 1, linear: [0, 0, 0], angular: [0, 0, 0] }, f],
        ['POST', '/dense-execution/cartesian/stop', {}, f],
        ['POST', '/dense-execution/cartesian/halt', {}, f],
        ['POST', '/dense-execution/cartesian/move', { pose: { xyz_m: [0.5, 0, 0.5], rpy_rad: [0, 0, 0] } }, f],
        ['POST', '/dense-execution/go-home', {}, f],
        ['POST', '/local-simulator/jog/end', { session_id: 'unknown-fields' }],
      ];
      const answer = (r: OlpReply) => `${r.status} ${String(r.json?.error ?? r.json?.code ?? '')}`;
      const differ: string[] = [];
      let compared = 0;
      try {
        for (const [method, route, body, headers] of table) {
          const plain = await o.client.raw(method as 'POST', route, stringifyExact(body as never), headers);
          const more = await o.client.raw(method as 'POST', route, stringifyExact({ ...(body as object), hil_unknown_field: { nested: [1, 'two'] }, another_one: null } as never), headers);
          // A route the plain body is refused 400 on has nothing to compare (on someone else's server: a body
          // it reads otherwise); on the reference server every plain body here is read.
          if (plain.status === 400 && w.external) continue;
          compared++;
          if (answer(plain) !== answer(more)) differ.push(`${method} ${route}: ${answer(plain)} without, ${answer(more)} with unknown fields (${more.text.slice(0, 120)})`);
        }
      } finally {
        await o.client.post('/dense-execution/stop', {});
        await o.client.raw('DELETE', `/dense-execution/cells/${registration.cell_id}`);
      }
      expect(differ).toEqual([]);
      expect(compared, 'routes compared').toBeGreaterThanOrEqual(w.external ? 15 : table.length);
    },
  );
});

describe('target fencing (part 2)', () => {
  test(
    'with a catalogue a POST under /dense-execution/ carries the fence headers; without them it is refused',
    covers('olp:fencing.headers'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      needsMotion({ skip }, target);
      const o = w.o;
      expect((await select(o, w.a, w.model)).status).toBe(200);
      const s = await selection(o);
      try {
        const bare = await o.client.post('/dense-execution/arm', { armed: true });
        expect(bare.status).toBeGreaterThanOrEqual(400);
        expect(typeof bare.json?.error, bare.text).toBe('string');
        expect(typeof bare.json?.detail, bare.text).toBe('string');
        expect((await grantOf(w.aClient)).active).toBe(false);
        // The valid twin: the same request with the fence is served.
        const ok = await o.client.post('/dense-execution/arm', { armed: true }, fence(s.gen, s.cell));
        expect(ok.status, ok.text).toBe(200);
        expect((await grantOf(w.aClient)).active).toBe(true);
      } finally {
        expect((await o.client.post('/dense-execution/stop', {})).status).toBe(200);
      }
      await released(w.aClient);
    },
  );

  test('fence headers missing: 428 target_fence_required', profile('profile:olp.fence_labels'), async ({ olps, skip, target, description }) => {
    const w = await world(olps, skip, target, description);
    expectMachineError(await w.o.client.post('/dense-execution/home', {}), 428, 'target_fence_required');
    expectMachineError(await w.o.client.post('/dense-execution/home', {}, { 'x-rt-target-generation': 'x', 'x-rt-target-cell': w.a }), 428, 'target_fence_required');
  });

  test(
    'another client selected another cell: 409 target_changed and nothing reaches either robot',
    covers('olp:fencing.target_changed', 'olp:error.target_changed'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      skip(w.b === undefined || w.bClient === undefined, 'needs two usable cells whose control services the suite can read (the facts file can name their sockets)');
      const o = w.o;
      expect((await select(o, w.a, w.model)).status).toBe(200);
      const mine = await selection(o); // this UI's view: a
      expect((await select(o, w.b!, (await discoveredModel(w, w.b!)) ?? w.model)).status).toBe(200); // another client switches
      const a = w.aClient;
      const b = w.bClient!;
      const before = [await grantOf(a), await grantOf(b)];
      const cursors = [await eventCursor(a), await eventCursor(b)];
      // Every POST under /dense-execution/ but the exempt ones (document 3 part 2), each with a body a UI
      // would send, so that only the fence can refuse it: an implementation that fences a list of routes
      // and forgot one answers something else here.
      const jog = { target_id: w.a, session_id: 's', revision: 1, axis: 'J1', direction: 1, fraction: 0.5 };
      const fenced = [
        ['/arm', { armed: true }],
        ['/home', {}],
        ['/load', { trajectory_digest: `sha256:${'0'.repeat(64)}` }],
        ['/play', {}],
        ['/move', { points: [[0, 0, 0, 0, 0, 0, 0, 0, 0]] }],
        ['/jog/begin', jog],
        ['/jog/update', { ...jog, revision: 2 }],
        ['/cartesian/start', { session_id: 'c', frame: 'world' }],
        ['/cartesian/intent', { session_id: 'c', revision: 1, linear: [0, 0, 0], angular: [0, 0, 0] }],
        ['/cartesian/move', { pose: { xyz_m: [0.5, 0, 0.5], rpy_rad: [0, 0, 0] } }],
      ] as const;
      for (const [route, body] of fenced) {
        expectMachineError(await o.client.post(`/dense-execution${route}`, body, fence(mine.gen, mine.cell)), 409, 'target_changed');
      }
      // The same cell id with an old generation is stale too.
      const now = await selection(o);
      expectMachineError(await o.client.post('/dense-execution/arm', { armed: true }, fence(now.gen - 1n, now.cell)), 409, 'target_changed');
      // The control services saw nothing: no acquire (the grant generation moves with each), no Home, and
      // not one event in either log since.
      expect([await grantOf(a), await grantOf(b)]).toEqual(before);
      expect([(await eventsSince(a, cursors[0]!)).map((e) => e.type), (await eventsSince(b, cursors[1]!)).map((e) => e.type)]).toEqual([[], []]);
      expect(before.map((g) => g.active)).toEqual([false, false]);
    },
  );

  test(
    'exempt routes answer with a stale fence: /stop, /pause, /heartbeat, /target, /cells, /jog/stop, /jog/end, /arm with armed false',
    covers('olp:fencing.exempt_routes', 'olp:route.dense_execution_run'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      const o = w.o;
      expect((await select(o, w.a, w.model)).status).toBe(200);
      const stale = fence(0, 'cell-zzz');
      const id = `cell-x-${process.pid}`;
      for (const [route, body] of [['/stop', {}], ['/pause', {}], ['/heartbeat', {}], ['/jog/stop', {}], ['/jog/end', {}], ['/arm', { armed: false }], ['/cells', { cell_id: id, model_id: w.model, control: { socket: target.address }, configuration_sha256: 'c'.repeat(64) }], ['/target', { cell: w.a }]] as const) {
        const r = await o.client.post(`/dense-execution${route}`, body, stale);
        expect(r.json?.error, `${route}: ${r.text}`).not.toBe('target_changed');
        if (route === '/cells' && w.external) {
          // The registry body is the reference server's: any answer but the fence's will do here.
          if (r.status === 200) o.registered.push(id);
          continue;
        }
        expect(r.status, `${route}: ${r.text}`).toBe(200);
      }
    },
  );

  test('/cartesian/stop and /cartesian/halt are fenced', covers('olp:fencing.cartesian_not_exempt'), async ({ olps, skip, target, description }) => {
    const w = await world(olps, skip, target, description);
    const o = w.o;
    expect((await select(o, w.a, w.model)).status).toBe(200);
    const s = await selection(o);
    for (const route of ['/cartesian/stop', '/cartesian/halt']) {
      expectMachineError(await o.client.post(`/dense-execution${route}`, {}, fence(s.gen - 1n, s.cell)), 409, 'target_changed');
      const fresh = await o.client.post(`/dense-execution${route}`, {}, fence(s.gen, s.cell));
      expect(fresh.json?.error).not.toBe('target_changed');
    }
  });

  test('with no catalogue there is one target, no selection and no fencing', covers('olp:fencing.single_target'), async ({ olps, skip, target, description }) => {
    const external = target.name === 'external';
    if (!external) skip(remote.cannot !== undefined, remote.cannot);
    needsMotion({ skip }, target);
    const o = useOlp({ skip }, await olps.open('single', () => ({ single: { socket: target.address, model_id: MODEL, robot_description_sha256: URDF_SHA }, planner: 'none' })));
    const found = external ? await discoverCells(o, target, description) : undefined;
    // A single target's listing may not name its pair: then it is the run's control service when the
    // facts file does not place it elsewhere (the bare server of the facts file is that deployment's).
    const client = external ? (found!.cells[0]?.control ?? (o.endpoint.bare && found!.cells.length === 1 ? target.client() : undefined)) : target.client();
    if (external) {
      skip(found!.catalogue, 'the OLP server has a cell catalogue: the single-target rules need a server without one (the facts file can name a bare one, bare_olp_url)');
      skip(client === undefined, 'the single target\'s control service is not known: name its control_socket in the OLP facts file');
    }
    const t = await o.client.get('/targets');
    expect(t.status, t.text).toBe(200);
    await inProfile('profile:olp.catalogue', () => expect([t.json?.catalogue, t.json?.targets?.length]).toEqual([false, 1]));
    expectMachineError(await o.client.post('/targets/select', { cell_id: 'default', model_id: MODEL }), 503, 'cell_catalogue_unavailable');
    const armed = await o.client.post('/dense-execution/arm', { armed: true });
    expect(armed.status, armed.text).toBe(200);
    const st = (await client!.status()).reply.data as Record<string, any>;
    expect(st.grant.active).toBe(true);
    expect((await o.client.post('/dense-execution/stop', {})).status).toBe(200);
    // The stop ends the cell's grant: stopping at once, revoked once the core has drained (toolkit released).
    expect((await released(client!)).grant.active).toBe(false);
  });

  test(
    'a selected cell that dies while armed: switching away is refused 409 cell_previous_stop_failed',
    covers('olp:error.cell_previous_stop_failed'),
    async ({ olps, skip, target, description }) => {
      const w = await world(olps, skip, target, description);
      const o = w.o;
      if (!w.external) {
        const sel = await select(o, 'cell-b');
        expect(sel.status, sel.text).toBe(200);
        const s = await selection(o);
        const armed = await o.client.post('/dense-execution/arm', { armed: true }, fence(s.gen, s.cell));
        expect(armed.status, armed.text).toBe(200);
        await B.stop(); // the cell dies (the last test of the file: B stays down)
        const r = await select(o, 'cell-a');
        expectMachineError(r, 409, 'cell_previous_stop_failed');
        expect((await selection(o)).cell).toBe('cell-b');
        return;
      }
      // On someone else's server the suite stages it itself: the run's control service registered as a cell
      // behind a line of the suite's own (CellLine) that, once the server holds that cell's lease, drops
      // every stop or release it carries, as a cell whose service dies as it is told to stop. Renewals still
      // pass, so the server holds the lease as far as it can tell when it is asked to switch.
      const line = new CellLine(join(dir, 'line.sock'), target.address);
      await line.listen();
      try {
        const dying = await wrongCell(w, 'line', skip);
        const sel = await select(o, dying, w.model);
        expect(sel.status, sel.text).toBe(200);
        const s = await selection(o);
        expect(s.cell).toBe(dying);
        const armed = await o.client.post('/dense-execution/arm', { armed: true }, fence(s.gen, s.cell));
        expect(armed.status, armed.text).toBe(200);
        // The lease is held on the cell (its own Status, read past the line).
        expect((await grantOf(w.aClient)).active).toBe(true);
        line.refuseStops();
        const r = await select(o, w.a, w.model);
        expectMachineError(r, 409, 'cell_previous_stop_failed');
        expect((await selection(o)).cell).toBe(dying);
      } finally {
        // The line is whole again: the server can stop the cell and the selection can move on (the server
        // is shared with the run's other files).
        line.mend();
        await o.client.post('/dense-execution/stop', {}).catch(() => undefined);
        await released(w.aClient).catch(() => undefined);
        await select(o, w.a, w.model).catch(() => undefined);
        await line.close();
      }
    },
  );
});

/** The model a listed cell names (GET /targets, or the facts file), for a selection of it. */
async function discoveredModel(w: World, cell: string): Promise<string | undefined> {
  if (!w.external) return MODEL;
  return (await discoverCells(w.o, undefined, undefined)).cells.find((c) => c.cell_id === cell)?.model_id;
}
