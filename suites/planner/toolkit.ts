// Shared pieces of the planner suites (document 2; document 3 "Program document"): the target's planner
// as a file-scoped fixture (skipped with a stated reason when the target has none), the line-weld program
// fixture and edits of it, and the plan options that ask for a dense trajectory.

import { readFileSync } from 'node:fs';
import { PlannerClient, type PlanQuery, type PlannerReply } from '../../harness/clients/planner.ts';
import { packWeldplan, sealProgram, type PackInput } from '../../harness/clients/weldplan.ts';
import { expect, test as base } from '../../harness/fixture.ts';
import { isJsonObject, parseExact, type JsonExact, type JsonObject } from '../../harness/oracle/json.ts';
import { plannerFromEnv, type PlannerEndpoint } from '../../harness/targets/index.ts';

export const PROGRAM_FIXTURE = new URL('../../fixtures/weldplans/line-weld.program.json', import.meta.url);
export const RESULT_SCHEMA = 'amr-weld-planner-v1.motion-plan-result.v1';
export const PROGRAM_ID = 'line_weld_demo';
/** What the offline programming server asks for (document 3 /weld-plan: weld and connecting optimisation, verification, dense). */
export const DENSE: PlanQuery = { dense: true, run_weld_trajopt: true, run_connecting_trajopt: true, verify: true, program_id: PROGRAM_ID };

/** A fresh copy of the fixture program (sealed: row_hash and program_digest valid). */
export function baseProgram(): JsonObject {
  return parseExact(readFileSync(PROGRAM_FIXTURE)) as JsonObject;
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

/** Skip unless the planner is the stub whose test hooks and store the harness can use. */
export function needsStub(ctx: Skip, p: Planner, what: string): void {
  ctx.skip(!p.stubHooks || !p.storeDir || p.pid === undefined, `${what} needs the planner stub started by the harness (its hooks, store directory and process)`);
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
