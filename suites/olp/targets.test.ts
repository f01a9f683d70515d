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
import { covers, describe, expect, profile, sharedRemote, type Description } from '../../harness/fixture.ts';
import type { RemoteStack } from '../../harness/targets/remote.ts';
import type { OlpCellSpec, OlpSpec, Target } from '../../harness/targets/index.ts';
import { expectMachineError, fence, olpTest as test, released, useOlp, type Olp, type OlpReply } from './toolkit.ts';

const URDF_SHA = 'sha256:' + createHash('sha256').update(readFileSync(new URL('../../fixtures/robots/sim-nine-axis.urdf', import.meta.url))).digest('hex');
const MODEL = 'sim-nine-axis';
const CAL = Buffer.from('planning calibration of cell-a\n');

let B: RemoteStack;
let bDescribe: Record<string, any>;
let bCreds: { host: string; port: number; cert: string; key: string; ca: string };
// Made by each opening of the shared stacks below: a recorded or replayed run opens them per test, and
// each opening's cleanup removes its own directory.
let dir = '';
let hangSocket = '';
let hang = false;
const held: Socket[] = [];
let hangServer: Server;

const remote = sharedRemote(async (open) => {
  // The internet link profile: a 3 s lease ceiling, so the OLP server's grant on this TLS cell survives a
  // loaded machine between its renewals (the lan ceiling is 500 ms).
  B = await open({ pairId: 'cell-b', args: ['--machine', fileURLToPath(new URL('../../fixtures/machines/nine-axis-internet.json', import.meta.url))] });
  const d = await B.local().describe();
  bDescribe = d.reply.data as Record<string, any>;
  bCreds = await B.creds('olp-server');
  // A socket that accepts and, while `hang` is set, never answers (a cell stuck mid-handshake).
  dir = mkdtempSync(join(tmpdir(), 'hil-olp-cells-'));
  hangSocket = join(dir, 'hang.sock');
  hangServer = createServer((s) => (hang ? held.push(s) : s.destroy()));
  await new Promise<void>((resolve, reject) => {
    hangServer.once('error', reject);
    hangServer.listen(hangSocket, () => resolve());
  });
  return async () => {
    for (const s of held.splice(0)) s.destroy();
    await new Promise<void>((r) => hangServer.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  };
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
    { cell_id: 'cell-gone', ...base, ...pinA, control: { socket: join(dir, 'nobody.sock') } },
    { cell_id: 'cell-hang', ...base, ...pinA, control: { socket: hangSocket } },
  ];
  return { cells, leaseMs: 3_000 };
}

async function cellsOlp(olps: { open: (n: string, s: () => OlpSpec) => Promise<Olp | undefined> }, skip: (c: boolean, n?: string) => void, target: Target, d: Description): Promise<Olp> {
  return useOlp({ skip }, await olps.open('catalogue', () => catalogue(target, d)));
}

async function selection(o: Olp): Promise<{ cell: string; gen: bigint }> {
  const s = (await o.client.get('/dense-execution/status')).json.target;
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
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      const r = await o.client.get('/targets');
      expect(r.status, r.text).toBe(200);
      const by = Object.fromEntries((r.json.targets as any[]).map((t) => [t.cell_id, t]));
      expect([by['cell-a'].reachable, by['cell-b'].reachable]).toEqual([true, true]);
      expect([by['cell-live'].reachable, by['cell-live'].reason]).toEqual([false, 'cell_mode_mismatch']);
      expect([by['cell-unpinned'].reachable, by['cell-unpinned'].reason]).toEqual([false, 'cell_configuration_missing']);
      expect([by['cell-gone'].reachable, by['cell-gone'].reason]).toEqual([false, 'cell_unreachable']);
      expect([by['cell-hang'].reachable, by['cell-hang'].reason]).toEqual([false, 'cell_unreachable']);
    },
  );

  test.for([
    ['cell-nope', MODEL, 'cell_id_unknown'],
    ['cell-a', 'another-robot', 'cell_model_mismatch'],
    ['cell-ros', MODEL, 'cell_backend_unavailable'],
    ['cell-bad-desc', MODEL, 'cell_description_invalid'],
    ['cell-live', MODEL, 'cell_mode_mismatch'],
    ['cell-other-pair', MODEL, 'cell_backend_mismatch'],
    ['cell-other-config', MODEL, 'cell_configuration_mismatch'],
    ['cell-unpinned', MODEL, 'cell_configuration_mismatch'],
    ['cell-gone', MODEL, 'cell_unreachable'],
  ] as const)('selecting %s (model %s) is refused 409 %s and the selection stays', covers('olp:error.cell_id_unknown', 'olp:error.cell_model_mismatch', 'olp:error.cell_backend_unavailable', 'olp:error.cell_description_invalid', 'olp:error.cell_mode_mismatch', 'olp:error.cell_backend_mismatch', 'olp:error.cell_configuration_mismatch', 'olp:error.cell_unreachable', 'olp:errors.machine_shape'), async ([cell, model, code], { olps, skip, target, description }) => {
    skip(remote.cannot !== undefined, remote.cannot);
    const o = await cellsOlp(olps, skip, target, description);
    const before = await selection(o);
    expectMachineError(await select(o, cell, model), 409, code);
    expect(await selection(o)).toEqual(before);
  });

  test(
    'selecting a cell over its Unix socket and one over mutual TLS: each answers as itself, the generation moves',
    covers('olp:route.targets', 'field:OlpTargetSelectRequest.cell_id', 'field:OlpTargetSelectRequest.model_id', 'olp:route.dense_execution_observe'),
    async ({ olps, skip, target, description }) => {
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      const g0 = (await selection(o)).gen;
      const a = await select(o, 'cell-a');
      expect(a.status, a.text).toBe(200);
      expect(a.json.selected).toEqual({ cell_id: 'cell-a', selection_generation: g0 + 1n });
      expect((await o.client.get('/dense-execution/cell')).json.pair_id).toBe(description.binding.pair_id);
      const b = await select(o, 'cell-b');
      expect(b.status, b.text).toBe(200);
      expect(b.json.selected).toEqual({ cell_id: 'cell-b', selection_generation: g0 + 2n });
      const cell = (await o.client.get('/dense-execution/cell')).json;
      expect([cell.cell_id, cell.pair_id, cell.transport]).toEqual(['cell-b', 'cell-b', 'https']);
      const caps = (await o.client.get('/dense-execution/capabilities')).json;
      expect(caps.capabilities.map((c: any) => c.name)).toContain('start_program');
      // Telemetry of the selected cell, decoded by the OLP server.
      const w = await o.client.get('/dense-execution/telemetry/window?window_ms=500');
      expect(w.status, w.text.slice(0, 300)).toBe(200);
      expect(w.json.axes.map((x: any) => x.id)).toEqual(bDescribe.axes.map((x: any) => x.id));
    },
  );

  test('POST /dense-execution/target selects by {cell}; the empty string clears the selection', covers('olp:route.dense_execution_cells', 'field:OlpDenseTargetRequest.cell'), async ({ olps, skip, target, description }) => {
    skip(remote.cannot !== undefined, remote.cannot);
    const o = await cellsOlp(olps, skip, target, description);
    const g = (await selection(o)).gen;
    const r = await o.client.post('/dense-execution/target', { cell: 'cell-a' });
    expect(r.status, r.text).toBe(200);
    expect(await selection(o)).toEqual({ cell: 'cell-a', gen: g + 1n });
    expect((await o.client.post('/dense-execution/target', { cell: '' })).status).toBe(200);
    expect(await selection(o)).toEqual({ cell: '', gen: g + 2n });
    expect((await o.client.get('/dense-execution/status')).json.connected).toBe(false);
  });

  test(
    'the cell registry: a cell without a configuration pin is not commissioned, a pinned id cannot be re-pinned',
    covers('olp:route.dense_execution_cells', 'olp:error.cell_not_commissioned', 'olp:error.cell_binding_pinned'),
    async ({ olps, skip, target, description }) => {
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      const ids = (r: OlpReply) => (r.json.cells as any[]).map((c) => c.cell_id);
      expect(ids(await o.client.get('/dense-execution/cells'))).toContain('cell-b');
      const cell = { cell_id: 'cell-new', model_id: MODEL, control: { socket: target.address }, pair_id: description.binding.pair_id };
      expectMachineError(await o.client.post('/dense-execution/cells', cell), undefined, 'cell_not_commissioned');
      const pinned = { ...cell, configuration_sha256: description.binding.configuration_sha256 };
      const made = await o.client.post('/dense-execution/cells', pinned);
      expect([made.status, made.json.created]).toEqual([200, true]);
      expect((await o.client.post('/dense-execution/cells', pinned)).json.created).toBe(false);
      expectMachineError(await o.client.post('/dense-execution/cells', { ...pinned, configuration_sha256: 'e'.repeat(64) }), undefined, 'cell_binding_pinned');
      expect(ids(await o.client.get('/dense-execution/cells'))).toContain('cell-new');
      expect((await o.client.raw('DELETE', '/dense-execution/cells/cell-new')).status).toBe(200);
      expect(ids(await o.client.get('/dense-execution/cells'))).not.toContain('cell-new');
    },
  );

  test('registry labels and statuses are as docs/profile.md says', profile('profile:olp.cells_registry', 'profile:olp.catalogue'), async ({ olps, skip, target, description }) => {
    skip(remote.cannot !== undefined, remote.cannot);
    const o = await cellsOlp(olps, skip, target, description);
    expectMachineError(await o.client.post('/dense-execution/cells', { cell_id: 'x', model_id: MODEL, control: { socket: '/nowhere' } }), 409, 'cell_not_commissioned');
    expectMachineError(await o.client.raw('DELETE', '/dense-execution/cells/cell-a'), 409, 'cell_binding_pinned');
    expectMachineError(await o.client.raw('DELETE', '/dense-execution/cells/no-such'), 404, 'cell_id_unknown');
  });

  test('one switch at a time: a selection while another is in progress is refused 409 cell_switch_busy', covers('olp:error.cell_switch_busy'), async ({ olps, skip, target, description }) => {
    skip(remote.cannot !== undefined, remote.cannot);
    const o = await cellsOlp(olps, skip, target, description);
    hang = true;
    try {
      const stuck = select(o, 'cell-hang');
      for (let i = 0; i < 100 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(held.length).toBeGreaterThan(0);
      expectMachineError(await select(o, 'cell-a'), 409, 'cell_switch_busy');
      hang = false;
      for (const s of held.splice(0)) s.destroy();
      expectMachineError(await stuck, 409, 'cell_unreachable');
    } finally {
      hang = false;
    }
    expect((await select(o, 'cell-a')).status).toBe(200);
  });

  test(
    'machine_planning_calibration_base64 is not read while a cell is connected: the cell\'s calibration is used',
    covers('olp:weld_plan.calibration_when_disconnected'),
    async ({ olps, skip, target, description }) => {
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      expect((await select(o, 'cell-a')).status).toBe(200);
      const program = JSON.parse(readFileSync(new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url), 'utf8'));
      const r = await o.client.post('/weld-plan', { program, tooling: { tool_id: 't' }, step_base64: '', workpiece_absent: true, cell_id: 'cell-a', program_id: 'line_weld_demo', machine_planning_calibration_base64: Buffer.from('ignored').toString('base64') });
      expect(r.status, r.text.slice(0, 300)).toBe(200);
      expect(r.json.planning_calibration).toEqual({ sha256: 'sha256:' + createHash('sha256').update(CAL).digest('hex'), source: 'target' });
    },
  );
});

describe('target fencing (part 2)', () => {
  test(
    'with a catalogue a POST under /dense-execution/ carries the fence headers; without them it is refused',
    covers('olp:fencing.headers'),
    async ({ olps, skip, target, description }) => {
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      expect((await select(o, 'cell-a')).status).toBe(200);
      const s = await selection(o);
      const bare = await o.client.post('/dense-execution/arm', { armed: true });
      expect(bare.status).toBeGreaterThanOrEqual(400);
      expect(bare.json.error).not.toBeUndefined();
      const ok = await o.client.post('/dense-execution/arm', { armed: true }, fence(s.gen, s.cell));
      expect(ok.status, ok.text).toBe(200);
      expect((await o.client.post('/dense-execution/stop', {})).status).toBe(200);
    },
  );

  test('fence headers missing: 428 target_fence_required', profile('profile:olp.fence_labels'), async ({ olps, skip, target, description }) => {
    skip(remote.cannot !== undefined, remote.cannot);
    const o = await cellsOlp(olps, skip, target, description);
    expectMachineError(await o.client.post('/dense-execution/home', {}), 428, 'target_fence_required');
    expectMachineError(await o.client.post('/dense-execution/home', {}, { 'x-rt-target-generation': 'x', 'x-rt-target-cell': 'cell-a' }), 428, 'target_fence_required');
  });

  test(
    'another client selected another cell: 409 target_changed and nothing reaches either robot',
    covers('olp:fencing.target_changed', 'olp:error.target_changed'),
    async ({ olps, skip, target, description }) => {
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      expect((await select(o, 'cell-a')).status).toBe(200);
      const mine = await selection(o); // this UI's view: cell-a
      expect((await select(o, 'cell-b')).status).toBe(200); // another client switches
      const a = target.client();
      const b = B.local();
      const before = [await grantOf(a), await grantOf(b)];
      const cursors = [await eventCursor(a), await eventCursor(b)];
      // Every POST under /dense-execution/ but the exempt ones (document 3 part 2), each with a body a UI
      // would send, so that only the fence can refuse it: an implementation that fences a list of routes
      // and forgot one answers something else here.
      const jog = { target_id: 'cell-a', session_id: 's', revision: 1, axis: 'J1', direction: 1, fraction: 0.5 };
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
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      expect((await select(o, 'cell-a')).status).toBe(200);
      const stale = fence(0, 'cell-zzz');
      for (const [route, body] of [['/stop', {}], ['/pause', {}], ['/heartbeat', {}], ['/jog/stop', {}], ['/jog/end', {}], ['/arm', { armed: false }], ['/cells', { cell_id: 'cell-x', model_id: MODEL, control: { socket: target.address }, configuration_sha256: 'c'.repeat(64) }], ['/target', { cell: 'cell-a' }]] as const) {
        const r = await o.client.post(`/dense-execution${route}`, body, stale);
        expect(r.json?.error, `${route}: ${r.text}`).not.toBe('target_changed');
        expect(r.status, `${route}: ${r.text}`).toBe(200);
      }
    },
  );

  test('/cartesian/stop and /cartesian/halt are fenced', covers('olp:fencing.cartesian_not_exempt'), async ({ olps, skip, target, description }) => {
    skip(remote.cannot !== undefined, remote.cannot);
    const o = await cellsOlp(olps, skip, target, description);
    expect((await select(o, 'cell-a')).status).toBe(200);
    const s = await selection(o);
    for (const route of ['/cartesian/stop', '/cartesian/halt']) {
      expectMachineError(await o.client.post(`/dense-execution${route}`, {}, fence(s.gen - 1n, s.cell)), 409, 'target_changed');
      const fresh = await o.client.post(`/dense-execution${route}`, {}, fence(s.gen, s.cell));
      expect(fresh.json?.error).not.toBe('target_changed');
    }
  });

  test('with no catalogue there is one target, no selection and no fencing', covers('olp:fencing.single_target'), async ({ olps, skip, target }) => {
    skip(remote.cannot !== undefined, remote.cannot);
    const o = useOlp({ skip }, await olps.open('single', () => ({ single: { socket: target.address, model_id: MODEL, robot_description_sha256: URDF_SHA }, planner: 'none' })));
    const t = await o.client.get('/targets');
    expect([t.json.catalogue, t.json.targets.length]).toEqual([false, 1]);
    expectMachineError(await o.client.post('/targets/select', { cell_id: 'default', model_id: MODEL }), 503, 'cell_catalogue_unavailable');
    const armed = await o.client.post('/dense-execution/arm', { armed: true });
    expect(armed.status, armed.text).toBe(200);
    const st = (await target.client().status()).reply.data as Record<string, any>;
    expect(st.grant.active).toBe(true);
    expect((await o.client.post('/dense-execution/stop', {})).status).toBe(200);
    // The stop ends the cell's grant: stopping at once, revoked once the core has drained (toolkit released).
    expect((await released(target.client())).grant.active).toBe(false);
  });

  test(
    'a selected cell that dies while armed: switching away is refused 409 cell_previous_stop_failed',
    covers('olp:error.cell_previous_stop_failed'),
    async ({ olps, skip, target, description }) => {
      skip(remote.cannot !== undefined, remote.cannot);
      const o = await cellsOlp(olps, skip, target, description);
      const sel = await select(o, 'cell-b');
      expect(sel.status, sel.text).toBe(200);
      const s = await selection(o);
      const armed = await o.client.post('/dense-execution/arm', { armed: true }, fence(s.gen, s.cell));
      expect(armed.status, armed.text).toBe(200);
      await B.stop(); // the cell dies (the last test of the file: B stays down)
      const r = await select(o, 'cell-a');
      expectMachineError(r, 409, 'cell_previous_stop_failed');
      expect((await selection(o)).cell).toBe('cell-b');
    },
  );
});
