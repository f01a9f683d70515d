// `hil certs`: the certificates of a remote pair (CA, server, clients, CRL).

import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError, wantsHelp } from './common.ts';

export async function certs(args: string[]): Promise<number> {
  if (await wantsHelp(args, 'certs')) return 0;
  const [sub, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      dir: { type: 'string' },
      'pair-id': { type: 'string' },
      host: { type: 'string', multiple: true },
      principal: { type: 'string' },
      serial: { type: 'string' },
    },
  });
  if (!values.dir) throw new UsageError('--dir DIR is required');
  const dir = resolve(values.dir);
  const tooling = await import('../certs.ts');
  const need = (v: string | undefined, flag: string): string => {
    if (!v) throw new UsageError(`${sub} needs ${flag}`);
    return v;
  };
  let out: unknown;
  try {
    switch (sub) {
      case 'create-pair':
        if (existsSync(join(dir, 'pair.json'))) throw new UsageError(`${dir} already holds a pair (pair.json); choose another directory`);
        out = await tooling.createPair({ dir, pairId: need(values['pair-id'], '--pair-id'), hosts: values.host });
        break;
      case 'issue-client':
        out = await tooling.issueClient({ dir, principal: need(values.principal, '--principal') });
        break;
      case 'revoke':
        out = await tooling.revokeSerial(dir, need(values.serial, '--serial'));
        break;
      case 'renew-crl':
        out = await tooling.renewCrl({ dir });
        break;
      default:
        throw new UsageError(`unknown certs subcommand ${sub ?? '(none)'}`);
    }
  } catch (e) {
    if (e instanceof tooling.CertError) {
      process.stderr.write(`hil certs: ${e.code}: ${e.message}\n`);
      return e.code === 'certs_usage' ? 2 : 1;
    }
    throw e;
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  return 0;
}
