// The program catalogue of the OLP server (document 3 part 4 "/programs*": the program catalog proxy),
// over a program store: a directory of robot.v4.program.v2 documents, one `<program_id>.json` each
// (docs/profile.md "OLP server: program catalogue"). A document is stored only when it validates as
// robot.v4.program.v2 (the weld planner's checks, sims/planner/program.ts: forbidden keys, ordering,
// row hashes, program digest) and carries its program_digest; revisions move forward one at a time
// (base_program_revision names the stored revision). Files are written to a temporary name and renamed.

import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJson, JsonDecodeError, JsonNumber, JsonObject } from '../json.ts';
import { ProgramInvalid, validateProgram } from '../planner/program.ts';
import { OlpError } from './http.ts';

const ID = /^[A-Za-z0-9._:-]{1,120}$/;

export interface ProgramSummary {
  program_id: string;
  program_name: string;
  program_revision: number;
  base_program_revision: number;
  program_state: string;
  program_digest: string;
  bytes: number;
}

const int = (v: unknown): number => (v instanceof JsonNumber ? Number(v.text) : NaN);

export class ProgramStore {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  private file(id: string): string {
    return join(this.dir, `${id}.json`);
  }

  private read(id: string): { bytes: Buffer; doc: JsonObject } | undefined {
    let bytes: Buffer;
    try {
      bytes = readFileSync(this.file(id));
    } catch {
      return undefined;
    }
    return { bytes, doc: decodeJson(bytes) as JsonObject };
  }

  private static summary(doc: JsonObject, bytes: number): ProgramSummary {
    const s = (k: string) => String(doc.get(k) ?? '');
    return {
      program_id: s('program_id'),
      program_name: s('program_name'),
      program_revision: int(doc.get('program_revision')),
      base_program_revision: int(doc.get('base_program_revision')),
      program_state: s('program_state'),
      program_digest: s('program_digest'),
      bytes,
    };
  }

  list(): { programs: ProgramSummary[]; problems: Array<{ file: string; problem: string }> } {
    const programs: ProgramSummary[] = [];
    const problems: Array<{ file: string; problem: string }> = [];
    for (const f of readdirSync(this.dir).filter((n) => n.endsWith('.json')).sort()) {
      try {
        const bytes = readFileSync(join(this.dir, f));
        programs.push(ProgramStore.summary(decodeJson(bytes) as JsonObject, bytes.length));
      } catch (e) {
        problems.push({ file: f, problem: (e as Error).message });
      }
    }
    return { programs, problems };
  }

  get(id: string): Buffer {
    if (!ID.test(id)) throw new OlpError(400, 'invalid_request', 'a program id is 1..120 letters, digits, dot, underscore, colon or hyphen');
    const r = this.read(id);
    if (!r) throw new OlpError(404, 'program_not_found', `no program ${id} in the catalogue`);
    return r.bytes;
  }

  put(id: string, bytes: Buffer): Record<string, unknown> {
    if (!ID.test(id)) throw new OlpError(400, 'invalid_request', 'a program id is 1..120 letters, digits, dot, underscore, colon or hyphen');
    let doc;
    try {
      doc = decodeJson(bytes);
    } catch (e) {
      if (e instanceof JsonDecodeError) throw new OlpError(400, 'invalid_request', `body is not one JSON value: ${e.message}`);
      throw e;
    }
    let view;
    try {
      view = validateProgram(doc);
    } catch (e) {
      if (e instanceof ProgramInvalid) {
        throw new OlpError(400, 'program_invalid', `not a valid robot.v4.program.v2 document: ${e.message}`, { problems: e.problems.slice(0, 20) });
      }
      throw e;
    }
    const d = doc as JsonObject;
    if (view.programId !== id) throw new OlpError(400, 'invalid_request', `program_id ${view.programId} is not the catalogue id ${id}`);
    if (typeof d.get('program_digest') !== 'string') throw new OlpError(400, 'program_invalid', 'the catalogue stores sealed documents: program_digest is required');
    const rev = int(d.get('program_revision'));
    const base = int(d.get('base_program_revision'));
    const old = this.read(id);
    if (old) {
      const oldRev = int(old.doc.get('program_revision'));
      if (old.doc.get('program_digest') === view.digest && oldRev === rev) return { ok: true, program_id: id, program_revision: rev, program_digest: view.digest, created: false, unchanged: true };
      if (base !== oldRev || rev !== oldRev + 1) {
        throw new OlpError(409, 'program_revision_conflict', `the catalogue holds revision ${oldRev}: a new document needs base_program_revision ${oldRev} and program_revision ${oldRev + 1} (got ${base} and ${rev})`);
      }
    } else if (base !== 0) {
      throw new OlpError(409, 'program_revision_conflict', `no program ${id} in the catalogue: a first document has base_program_revision 0 (got ${base})`);
    }
    const tmp = join(this.dir, `.${id}.${randomBytes(6).toString('hex')}.tmp`);
    writeFileSync(tmp, bytes);
    renameSync(tmp, this.file(id));
    return { ok: true, program_id: id, program_revision: rev, program_digest: view.digest, created: !old, unchanged: false };
  }
}
