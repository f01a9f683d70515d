// POST /v1/program as a client sends it (document 1 part 4 prepare_program): the dense file as the body,
// the fence in the X-Control-Session and X-Control-Generation headers. The reply is strictly checked.

import { contentType } from '../../harness/clients/control.ts';
import type { ControlClient } from '../../harness/clients/control.ts';
import type { Session } from '../../harness/clients/cell.ts';
import { checkReply, type CheckedReply } from '../../harness/oracle/reply.ts';

export function postProgram(client: ControlClient, s: Pick<Session, 'session' | 'generation'>, bytes: Uint8Array, headers: Record<string, string> = {}): Promise<CheckedReply> {
  return client
    .raw('POST', '/v1/program', bytes, { 'content-type': 'application/octet-stream', 'x-control-session': s.session, 'x-control-generation': String(s.generation), ...headers })
    .then((r) => checkReply(r.status, contentType(r), r.body, 'prepare_program'));
}
