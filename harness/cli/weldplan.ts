// `hil weldplan pack`: a .weldplan container from a program document.

import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { packWeldplan, programDigest, sealProgram } from '../clients/weldplan.ts';
import { isJsonObject, parseExact } from '../oracle/json.ts';
import type { JsonObject } from '../oracle/json.ts';
import { InputError, UsageError, wantsHelp } from './common.ts';

export async function weldplanCommand(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'weldplan')) return 0;
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { out: { type: 'string' }, tooling: { type: 'string' }, step: { type: 'string' }, seal: { type: 'boolean', default: false } } });
  if (positionals[0] !== 'pack' || positionals.length !== 2 || !values.out) throw new UsageError('expected: weldplan pack PROGRAM.json --out FILE');
  // An input file that is missing or not what it should be is bad input: one line, exit 2, nothing written.
  const read = (file: string, what: string): Uint8Array => {
    try {
      return new Uint8Array(readFileSync(resolve(file)));
    } catch (e) {
      throw new InputError(`cannot read ${what} ${file}: ${(e as Error).message}`);
    }
  };
  const object = (file: string, what: string): JsonObject => {
    const bytes = read(file, what);
    let v: ReturnType<typeof parseExact>;
    try {
      v = parseExact(bytes);
    } catch (e) {
      throw new InputError(`${what} ${file}: ${(e as { code?: string }).code ?? 'error'}: ${(e as Error).message.split('\n')[0]}`);
    }
    if (!isJsonObject(v)) throw new InputError(`${what} ${file} is not a JSON object`);
    return v;
  };
  let program = object(positionals[1]!, 'program document');
  const tooling = values.tooling ? object(values.tooling, 'tooling') : undefined;
  const step = values.step ? read(values.step, 'STEP file') : undefined;
  if (values.seal) program = sealProgram(program);
  const bytes = packWeldplan({ program, ...(tooling ? { tooling } : {}), ...(step ? { step } : {}) });
  writeFileSync(resolve(values.out), bytes);
  process.stdout.write(`${values.out}: ${bytes.length} bytes, program_digest ${programDigest(program)}\n`);
  return 0;
}
