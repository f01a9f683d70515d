// Shared pieces of the planner suites (document 2; document 3 "Program document"): the target's planner
// as a file-scoped fixture (skipped with a stated reason when the target has none), the line-weld program
// fixture and edits of it, and the plan options that ask for a dense trajectory.

import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PlannerClient, type PlanQuery, type PlannerReply } from '../../harness/clients/planner.ts';
import { packWeldplan, sealProgram, type PackInput } from '../../harness/clients/weldplan.ts';
import { expect, inProfile, test as base } from '../../harness/fixture.ts';
import { isJsonObject, parseExact, type JsonExact, type JsonObject } from '../../harness/oracle/json.ts';
import { plannerFromEnv, type PlannerEndpoint } from '../../harness/targets/index.ts';

export const PROGRAM_FIXTURE = new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url);
export const RESULT_SCHEMA = 'amr-weld-planner-v1.motion-plan-result.v1';
export const PROGRAM_ID = 'line_weld_demo';
/** What the offline programming server asks for (document 3 /weld-plan: weld and connecting optimisation, verification, dense). */
export const DENSE: PlanQuery = { dense: true, run_weld_trajopt: true, run_connecting_trajopt: true, verify: true, program_id: PROGRAM_ID };

/**
 * The cell the planner plans for: the program's `placement.cell_id` and `robot.model_id` (document 3: they
 * are equal). The stub's cell is sim-nine-axis; a team running the suites against its own planner names
 * one of its cells in HIL_PLANNER_CELL (README "Your own planner"). Everything else about the cell (axis
 * names, mask, ceilings, robot description) is read from the planner's answers (cellOf), never assumed.
 */
export const CELL_ID = process.env.HIL_PLANNER_CELL || 'sim-nine-axis';

/** A fresh copy of the fixture program placed on the planner's cell (sealed: row_hash and program_digest valid). */
export function baseProgram(): JsonObject {
  const p = parseExact(readFileSync(PROGRAM_FIXTURE)) as JsonObject & Record<string, any>;
  if (p.placement.cell_id === CELL_ID) return p;
  p.placement.cell_id = CELL_ID;
  p.robot.model_id = CELL_ID;
  return sealProgram(p);
}

export type Edit = (p: JsonObject & Record<string, any>) => void;

/** The fixture edited, then sealed again (so only the edit can break a rule). */
export function program(edit?: Edit): JsonObject {
  const p = baseProgram() as JsonObject & Record<string, any>;
  edit?.(p);
  return sealProgram(p);
}

export function weldplan(edit?: Edit, pack: Omit<PackInput, 'program'> = {}): Uint8Array {
  return packWeldplan({ program: program(edit), ...pack });
}

export const nodeById = (p: Record<string, any>, id: string): Record<string, any> => p.nodes.find((n: Record<string, any>) => n.id === id);
export const obj = (v: JsonExact | undefined): Record<string, any> => (isJsonObject(v) ? (v as Record<string, any>) : {});

export interface Planner extends PlannerEndpoint {
  client: PlannerClient;
}

// The planner comes with the kind of target (harness/targets: a stub of its own on sim and replay,
// HIL_PLANNER_URL on external), not from the file's cell: a file of planner tests starts no cell stack.
export const plannerTest = base.extend<{ $file: { planner: Planner | undefined } }>({
  planner: [
    async ({}, use) => {
      const opened = await plannerFromEnv();
      if (!opened) return use(undefined);
      const client = new PlannerClient(opened.endpoint.url);
      try {
        await use({ ...opened.endpoint, client });
      } finally {
        await client.close();
        await opened.close();
      }
    },
    { scope: 'file' },
  ],
});

type Skip = { skip: (c: boolean, note?: string) => void };

/** The planner, or a skip with the reason stated when the target has none. */
export function usePlanner(ctx: Skip, p: Planner | undefined): Planner {
  ctx.skip(!p, 'the target has no weld planner (external target: set HIL_PLANNER_URL)');
  return p!;
}

/**
 * The planner's dense store directory when the harness can read it: the stub's, or the directory a team
 * started its planner with (`--dense-store-dir`, document 2 part 4) named in HIL_PLANNER_STORE_DIR.
 */
export function storeDirOf(p: Planner): string | undefined {
  return p.storeDir ?? (process.env.HIL_PLANNER_STORE_DIR || undefined);
}

/** Skip unless the planner is the stub whose test hooks and store the harness can use. */
export function needsStub(ctx: Skip, p: Planner, what: string): void {
  ctx.skip(!p.stubHooks || !p.storeDir || p.pid === undefined, `${what} needs the planner stub started by the harness (its hooks, store directory and process)`);
}

/**
 * A hold on the stub's stages (docs/profile.md "Test hooks": `stage_release`): a plan whose extensions carry
 * `hooks` waits after each stage it reports until release() is called, or for its stage_delay_ms when the
 * file cannot reach it (a stub on another machine, or another planner, which ignores the hook). The test
 * then decides when the plan goes on, not a delay guessed long enough for a loaded host. close() removes
 * the release file.
 */
export interface StageHold {
  hooks: { stage_delay_ms: number; stage_release: string };
  release(): void;
  close(): void;
}

export function stageHold(delayMs: number): StageHold {
  const token = randomBytes(12).toString('hex');
  const file = join(tmpdir(), `weld-planner-stub-release-${token}`);
  return {
    hooks: { stage_delay_ms: delayMs, stage_release: token },
    release: () => writeFileSync(file, ''),
    close: () => rmSync(file, { force: true }),
  };
}

/** The error text of a JSON reply body ({"error": ...}), or undefined. */
export const errorOf = (r: PlannerReply): string | undefined => (typeof obj(r.json).error === 'string' ? obj(r.json).error : undefined);

/** Plan a container with dense output and fetch the dense file; a refused plan or dense_error fails the test. */
export async function planDense(p: Planner, container: Uint8Array, query: PlanQuery = DENSE): Promise<{ result: Record<string, any>; blob: Uint8Array }> {
  const r = await p.client.plan(container, query);
  expect(r.status, r.text.slice(0, 300)).toBe(200);
  const result = obj(r.json);
  expect(result.dense_error, JSON.stringify(result.dense_error)).toBeUndefined();
  const f = await p.client.dense(result.dense.trajectory_digest);
  expect(f.status).toBe(200);
  return { result, blob: f.body };
}

/** A JSON number as a float64, whichever way it was spelled (document 2 writes 2.0; `2` is the same number). */
export const num = (v: unknown): number => (typeof v === 'bigint' ? Number(v) : (v as number));

/** The `<type>: <message>` shape of a planning failure's error (document 2 part 7). */
export const TYPE_MESSAGE = /^[A-Za-z_][A-Za-z0-9_.]*: \S/;

/** What the planner says of its cell, read from a plan of the fixture (document 2 part 2), never assumed. */
export interface CellFacts {
  /** The result's cell_id. */
  cellId: string;
  /** seams[].axis_names: the commanded axes, in column order. */
  axisNames: string[];
  /** One bit per commanded column (document 2: J1 = bit 0; 0x1ff for nine axes, 0x3f for six). */
  axisMask: bigint;
  /** dense.max_abs_qd_rad_s: the nine per-axis velocity ceilings. */
  ceilings: number[];
  /** dense.robot_cell. */
  robotCell: Record<string, any>;
  /** The fixture's plan result (dense=true). */
  result: Record<string, any>;
}

const cells = new Map<string, Promise<CellFacts>>();

/** The planner's cell facts (one plan of the fixture per planner, shared by the file's tests). */
export function cellOf(p: Planner): Promise<CellFacts> {
  let c = cells.get(p.url);
  if (!c) {
    c = (async () => {
      const r = await p.client.plan(weldplan(), DENSE);
      expect(r.status, `the fixture program plans on ${CELL_ID}: ${r.text.slice(0, 300)}`).toBe(200);
      const result = obj(r.json);
      expect(result.dense_error, JSON.stringify(result.dense_error)).toBeUndefined();
      const axisNames = (result.seams?.[0]?.axis_names ?? []) as string[];
      let axisMask = 0n;
      for (const n of axisNames) {
        const m = /^J([1-9])$/.exec(n);
        expect(m, `axis name ${n} is one of J1..J9 (document 2 columns)`).not.toBeNull();
        axisMask |= 1n << BigInt(Number(m![1]) - 1);
      }
      return { cellId: result.cell_id, axisNames, axisMask, ceilings: (result.dense.max_abs_qd_rad_s as unknown[]).map(num), robotCell: obj(result.dense.robot_cell), result };
    })();
    cells.set(p.url, c);
    c.catch(() => cells.delete(p.url));
  }
  return c;
}

const accepted = new Map<string, Promise<void>>();

/** The twin must plan: 200, and no dense_error when dense was asked for (checked once per distinct twin). */
export function expectAccepted(p: Planner, twin: Uint8Array, query: PlanQuery = DENSE): Promise<void> {
  const key = `${p.url} ${createHash('sha256').update(twin).digest('hex')} ${JSON.stringify(query, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`;
  let a = accepted.get(key);
  if (!a) {
    a = (async () => {
      const r = await p.client.plan(twin, query);
      expect(r.status, `the valid twin is accepted: ${r.text.slice(0, 300)}`).toBe(200);
      if (query.dense) {
        const e = obj(r.json).dense_error;
        // A taught move the planner does not reach on its own cell (motion_join_failed, motion_not_planned) is
        // its planning, not a refusal: document 2 does not make every planner reach the fixture's moves.
        if (e !== undefined && ['motion_join_failed', 'motion_not_planned'].includes(obj(e).reason)) {
          await inProfile('profile:planner.stub_planning', () => expect(e, `the valid twin plans: ${JSON.stringify(e)}`).toBeUndefined());
        } else {
          expect(e, `the valid twin plans: ${JSON.stringify(e)}`).toBeUndefined();
        }
      }
    })();
    accepted.set(key, a);
    a.catch(() => accepted.delete(key));
  }
  return a;
}

export interface Refusal {
  /** The docs/profile.md decision the refusal's text is checked against (informative on another planner). */
  profile: string;
  /** The text our decision gives (asserted through inProfile). */
  text: RegExp;
  /** The same request with only the rule under test satisfied: it must be accepted (default: the fixture). */
  twin?: Uint8Array;
  /** The refusal itself is our decision (the documents give no such rule): the whole check is a profile check. */
  refusalIsProfile?: boolean;
  /**
   * The refusal (422 and "<type>: <message>") is the decision named here, not document 2's: document 2 part 7
   * owes a 422 only for an unreadable container, a wrong program schema or missing cell meshes, and a planner
   * that plans a program breaking another document 3 rule differs informatively. The text stays `profile`.
   */
  refusalProfile?: string;
  query?: PlanQuery;
}

/**
 * A container or program the planner must refuse. Document 2 part 7 says only: 422, error `<type>: <message>`.
 * That much is asserted; the text of our decision goes through inProfile; and the valid twin, which differs
 * only in the rule under test, is accepted, so the refusal is for that rule and not for something else.
 */
export async function expectRefused(p: Planner, bytes: Uint8Array, o: Refusal): Promise<void> {
  const query = o.query ?? DENSE;
  const r = await p.client.plan(bytes, query);
  const documented = () => {
    expect(r.status, r.text.slice(0, 300)).toBe(422);
    expect(errorOf(r), `error "<type>: <message>": ${r.text.slice(0, 300)}`).toMatch(TYPE_MESSAGE);
  };
  const refusalId = o.refusalProfile ?? (o.refusalIsProfile ? o.profile : undefined);
  if (refusalId) {
    await inProfile(refusalId, () => {
      documented();
      if (refusalId === o.profile) expect(errorOf(r)).toMatch(o.text);
    });
    // A planner that (informatively) planned the request has no refusal whose text or cause could be judged.
    if (r.status !== 422) return;
    if (refusalId !== o.profile) await inProfile(o.profile, () => expect(errorOf(r)).toMatch(o.text));
  } else {
    documented();
    await inProfile(o.profile, () => expect(errorOf(r)).toMatch(o.text));
  }
  await expectAccepted(p, o.twin ?? weldplan(), query);
}
