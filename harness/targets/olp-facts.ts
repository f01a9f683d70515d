// The deployment facts of someone else's OLP server (`hil run --target external --olp-url URL --olp-facts
// FILE`, HIL_OLP_FACTS): the one file in which a team says what the suites cannot discover through the
// routes of document 3 part 4. Everything here is optional; without the file the suites discover the cells
// from GET /targets and GET /dense-execution/cells and take every other fact as the documents state it.
// Validated loudly: a malformed file is a harness error, never a silent default (README "Your own OLP
// server" shows an example).
//
//   {
//     "cells": {
//       "cell-a": { "model_id": "my-robot", "control_socket": "/run/rt-control/control.sock" }
//     },
//     "heartbeat_ms": 5000,
//     "weld_plan_timeout_ms": 3000,
//     "planner_url": "http://127.0.0.1:8795",
//     "planner_stub": true,
//     "bare_olp_url": "http://127.0.0.1:8796",
//     "own_planner": { "listen": "127.0.0.1:8797", "olp_url": "http://127.0.0.1:8798" }
//   }
//
// - cells.<id>.model_id: the robot model a selection of that cell names, when GET /targets does not say.
// - cells.<id>.control_socket: the cell's control service (document 1), so that the suites can read from the
//   cell itself what reached the robot. Without it a cell is the run's own control service (--socket) when
//   its listing names the same pair and configuration as that service's Describe; otherwise tests that must
//   look at the cell skip and say so.
// - heartbeat_ms: the UI heartbeat interval the server was configured with, when it is not the 5 s of
//   document 3 parts 4 and 8: the heartbeat tests wait out that interval instead, and the test of the 5 s
//   default runs against bare_olp_url (or skips with that reason without one).
// - weld_plan_timeout_ms: a plan bound shorter than the 30 minutes of part 8 that the server was configured
//   with (the bound is judged through it; without it the test of the bound skips and says why).
// - planner_url: the weld planner behind the server (to compare a plan's result with the planner's own).
// - planner_stub: true when that planner is this project's stub (`hil planner serve`), whose hooks
//   (docs/profile.md "Weld planner stub: what it plans", test hooks) let the suites provoke a slow plan or a planner failure.
// - bare_olp_url: a second server of the deployment configured with none of the above: no cell catalogue
//   (its single target the run's control service), no planner, no CAD or seam worker. The tests of what a
//   server without them answers (503 seam_worker_unavailable, motion_origin_unavailable,
//   cell_catalogue_unavailable; one target, no selection, no fence) run against it. Being configured with
//   nothing, it runs at the documented defaults (the 5 s heartbeat, the 30-minute plan bound): the test of
//   the 5 s default runs against it when heartbeat_ms says the main server was configured otherwise.
// - own_planner: a server of the deployment whose planner is an address the suites answer themselves:
//   `olp_url` is that server (no catalogue, its single target the run's control service with the robot of
//   the main server's cell), `listen` the host:port it calls as its planner, where nothing else listens.
//   The tests that need a planner of their own (one that answers without a plan result, a dense file that is
//   gone or unreachable, a dense file without robot_cell) listen there while they run, one at a time.

import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { HarnessError } from '../errors.ts';

export interface OlpFactsCell {
  model_id?: string;
  control_socket?: string;
}

export interface OlpFacts {
  cells: Record<string, OlpFactsCell>;
  heartbeat_ms?: number;
  weld_plan_timeout_ms?: number;
  planner_url?: string;
  planner_stub?: boolean;
  bare_olp_url?: string;
  own_planner?: { listen: string; olp_url: string };
}

const TOP = new Set(['cells', 'heartbeat_ms', 'weld_plan_timeout_ms', 'planner_url', 'planner_stub', 'bare_olp_url', 'own_planner']);
const CELL = new Set(['model_id', 'control_socket']);

/** Parse and check a facts document; `where` names it in errors. */
export function parseOlpFacts(text: string, where: string): OlpFacts {
  const bad = (why: string): never => {
    throw new HarnessError('HIL_ERR_TARGET_OPTION', `OLP facts ${where}: ${why}`);
  };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return bad(`not JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('not a JSON object');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!TOP.has(k)) bad(`unknown key ${k} (known: ${[...TOP].join(', ')})`);
  const facts: OlpFacts = { cells: {} };
  if (o.cells !== undefined) {
    if (typeof o.cells !== 'object' || o.cells === null || Array.isArray(o.cells)) bad('cells must be an object keyed by cell_id');
    for (const [id, c] of Object.entries(o.cells as Record<string, unknown>)) {
      if (typeof c !== 'object' || c === null || Array.isArray(c)) bad(`cells.${id} must be an object`);
      const cell = c as Record<string, unknown>;
      for (const k of Object.keys(cell)) if (!CELL.has(k)) bad(`cells.${id}: unknown key ${k} (known: ${[...CELL].join(', ')})`);
      if (cell.model_id !== undefined && (typeof cell.model_id !== 'string' || cell.model_id === '')) bad(`cells.${id}.model_id must be a nonempty string`);
      if (cell.control_socket !== undefined && (typeof cell.control_socket !== 'string' || !isAbsolute(cell.control_socket))) bad(`cells.${id}.control_socket must be an absolute path`);
      facts.cells[id] = { ...(cell.model_id !== undefined ? { model_id: cell.model_id as string } : {}), ...(cell.control_socket !== undefined ? { control_socket: cell.control_socket as string } : {}) };
    }
  }
  if (o.heartbeat_ms !== undefined) {
    if (!Number.isInteger(o.heartbeat_ms) || (o.heartbeat_ms as number) < 1) bad('heartbeat_ms must be a whole number of ms >= 1');
    facts.heartbeat_ms = o.heartbeat_ms as number;
  }
  if (o.weld_plan_timeout_ms !== undefined) {
    if (!Number.isInteger(o.weld_plan_timeout_ms) || (o.weld_plan_timeout_ms as number) < 1) bad('weld_plan_timeout_ms must be a whole number of ms >= 1');
    facts.weld_plan_timeout_ms = o.weld_plan_timeout_ms as number;
  }
  if (o.planner_stub !== undefined) {
    if (typeof o.planner_stub !== 'boolean') bad('planner_stub must be true or false');
    facts.planner_stub = o.planner_stub as boolean;
    if (facts.planner_stub && o.planner_url === undefined) bad('planner_stub needs planner_url (the stub is asked how a plan went)');
  }
  if (o.bare_olp_url !== undefined) {
    if (typeof o.bare_olp_url !== 'string' || !/^https?:\/\//.test(o.bare_olp_url)) bad('bare_olp_url must be an http(s) URL');
    facts.bare_olp_url = (o.bare_olp_url as string).replace(/\/+$/, '');
  }
  if (o.own_planner !== undefined) {
    const w = o.own_planner as Record<string, unknown>;
    if (typeof w !== 'object' || w === null || Array.isArray(w)) bad('own_planner must be an object {listen, olp_url}');
    for (const k of Object.keys(w)) if (k !== 'listen' && k !== 'olp_url') bad(`own_planner: unknown key ${k} (known: listen, olp_url)`);
    if (typeof w.listen !== 'string' || !/^(127\.0\.0\.1|localhost|\[::1\]):([1-9][0-9]{0,4})$/.test(w.listen) || Number(w.listen.slice(w.listen.lastIndexOf(':') + 1)) > 65535) bad('own_planner.listen must be a loopback HOST:PORT with a port 1..65535 (the suites listen there)');
    if (typeof w.olp_url !== 'string' || !/^https?:\/\//.test(w.olp_url)) bad('own_planner.olp_url must be an http(s) URL');
    facts.own_planner = { listen: w.listen as string, olp_url: (w.olp_url as string).replace(/\/+$/, '') };
  }
  if (o.planner_url !== undefined) {
    if (typeof o.planner_url !== 'string' || !/^https?:\/\//.test(o.planner_url)) bad('planner_url must be an http(s) URL');
    facts.planner_url = (o.planner_url as string).replace(/\/+$/, '');
  }
  return facts;
}

/** The facts of the file HIL_OLP_FACTS names, or none. */
export function olpFactsFromFile(file: string | undefined): OlpFacts {
  if (!file) return { cells: {} };
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new HarnessError('HIL_ERR_TARGET_OPTION', `OLP facts ${file}: cannot read it (${(e as Error).message})`);
  }
  return parseOlpFacts(text, file);
}
