// Cells the OLP server can drive (document 3 part 4 "GET /targets, POST /targets/select", the
// /dense-execution/cells registry; part 2 "Target fencing"; part 7 the cell_* refusals). The catalogue is
// a JSON file (its layout is ours: docs/profile.md "OLP server: cell catalogue"); without one the server
// has a single target, no selection and no fencing.

import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import type { ControlAddress } from './control.ts';
import { OlpError } from './http.ts';

export interface CatalogueCell {
  cell_id: string;
  model_id: string;
  /** sha256:<64 hex> of the robot description the cell is built to, or absent: the cell cannot say which robot it is. */
  robot_description_sha256?: string;
  /** simulation or live (compared with the control service's Describe backend). */
  mode: string;
  /** The execution backend; this server drives the core (the control service) only. */
  backend: string;
  control: ControlAddress;
  /** The binding's pair id the cell's control service must report. */
  pair_id?: string;
  /** The configuration pin (commissioning): Describe's configuration_sha256 must equal it. */
  configuration_sha256?: string;
  /** Planning calibration of the cell, as a file (machine_planning_calibration_sha256 and source target). */
  calibration?: Uint8Array;
  /** Registered at run time (POST /dense-execution/cells), not read from the catalogue file. */
  registered?: boolean;
}

const SHA = /^sha256:[0-9a-f]{64}$/;
const ID = /^[A-Za-z0-9._:-]{1,120}$/;

/** Read and check one cell entry; paths are relative to `base`. */
export function parseCell(e: unknown, base: string, where: string): CatalogueCell {
  const bad = (why: string): never => {
    throw new OlpError(400, 'invalid_request', `${where}: ${why}`);
  };
  if (!e || typeof e !== 'object' || Array.isArray(e)) bad('not an object');
  const o = e as Record<string, unknown>;
  const s = (k: string, required: boolean): string | undefined => {
    const v = o[k];
    if (v === undefined && !required) return undefined;
    if (typeof v !== 'string' || v === '') bad(`${k} must be a nonempty string`);
    return v as string;
  };
  const cell_id = s('cell_id', true)!;
  if (!ID.test(cell_id)) bad('cell_id must be 1..120 letters, digits, dot, underscore, colon or hyphen');
  const c = o.control as Record<string, unknown> | undefined;
  if (!c || typeof c !== 'object') bad('control must be {socket} or {url, cert, key, ca}');
  const path = (v: unknown, k: string) => {
    if (typeof v !== 'string' || v === '') bad(`control.${k} must be a path`);
    return isAbsolute(v as string) ? (v as string) : resolve(base, v as string);
  };
  let control: ControlAddress;
  if (c!.socket !== undefined) control = { socket: path(c!.socket, 'socket') };
  else {
    if (typeof c!.url !== 'string' || !/^https:\/\//.test(c!.url)) bad('control.url must be an https URL');
    control = { url: c!.url as string, cert: path(c!.cert, 'cert'), key: path(c!.key, 'key'), ca: path(c!.ca, 'ca'), ...(typeof c!.servername === 'string' ? { servername: c!.servername } : {}) };
  }
  const desc = s('robot_description_sha256', false);
  if (desc !== undefined && !SHA.test(desc)) bad('robot_description_sha256 must be sha256:<64 hex>');
  const conf = s('configuration_sha256', false);
  let calibration: Uint8Array | undefined;
  const cal = s('machine_planning_calibration_file', false);
  if (cal !== undefined) {
    try {
      calibration = readFileSync(isAbsolute(cal) ? cal : resolve(base, cal));
    } catch (x) {
      bad(`machine_planning_calibration_file: ${(x as Error).message}`);
    }
  }
  return {
    cell_id,
    model_id: s('model_id', true)!,
    ...(desc ? { robot_description_sha256: desc } : {}),
    mode: s('mode', false) ?? 'simulation',
    backend: s('backend', false) ?? 'core',
    control,
    ...(s('pair_id', false) ? { pair_id: s('pair_id', false) } : {}),
    ...(conf ? { configuration_sha256: conf } : {}),
    ...(calibration ? { calibration } : {}),
  };
}

/** The catalogue file's cells; an unreadable or malformed file is cell_catalogue_unavailable. */
export function readCatalogue(file: string): CatalogueCell[] {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new OlpError(503, 'cell_catalogue_unavailable', `cell catalogue ${file}: ${(e as Error).message}`);
  }
  const cells = (doc as { cells?: unknown })?.cells;
  if (!Array.isArray(cells)) throw new OlpError(503, 'cell_catalogue_unavailable', `cell catalogue ${file}: no cells array`);
  try {
    const out = cells.map((c, i) => parseCell(c, dirname(file), `cells[${i}]`));
    const dup = out.find((c, i) => out.findIndex((x) => x.cell_id === c.cell_id) !== i);
    if (dup) throw new OlpError(400, 'invalid_request', `cell ${dup.cell_id} appears twice`);
    return out;
  } catch (e) {
    if (e instanceof OlpError) throw new OlpError(503, 'cell_catalogue_unavailable', `cell catalogue ${file}: ${e.detail}`);
    throw e;
  }
}

/** Public view of a cell (no key paths). */
export function cellView(c: CatalogueCell): Record<string, unknown> {
  return {
    cell_id: c.cell_id,
    model_id: c.model_id,
    robot_description_sha256: c.robot_description_sha256 ?? '',
    mode: c.mode,
    backend: c.backend,
    transport: 'socket' in c.control ? 'unix' : 'https',
    pair_id: c.pair_id ?? '',
    configuration_sha256: c.configuration_sha256 ?? '',
    registered: c.registered === true,
  };
}
