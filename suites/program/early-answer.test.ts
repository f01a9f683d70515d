// An over-limit prepare_program body gets an early answer and is not read on (document 1 part 4
// prepare_program, part 8 limits; docs/profile.md "Program admission", route order): a body that never
// ends is answered 413 body_too_large once it passes 39298580 bytes, and the connection is closed.

import { heldBody } from '../../harness/clients/rawhttp.ts';
import { cycleFree, describe, expect, profile, test } from '../../harness/fixture.ts';

// No test here needs the file's cell to cycle on its own (harness/fixture.ts cycleFree).
cycleFree();

const LIMIT = 39_298_580;
const MiB = 1024 * 1024;

describe('prepare_program body limit (profile)', () => {
  test(
    'an endless chunked body is answered 413 body_too_large once it passes the limit, and the connection is closed before the client stops',
    { ...profile('profile:program.early_answer'), timeout: 120_000 },
    async ({ cell, target, skip }) => {
      skip(!target.address.startsWith('/'), 'the body is sent over the control socket (a Unix socket path)');
      const s = await cell.hold({ requested_lease_ms: 5_000 });
      const cap = 256 * MiB;
      const out = await heldBody('http://localhost', '/v1/program', { 'content-type': 'application/octet-stream', 'x-control-session': s.session, 'x-control-generation': String(s.generation) }, { capBytes: cap, socketPath: target.address });
      const why = out.reply ? `${out.reply.status} ${out.reply.text.slice(0, 200)}` : 'no reply';
      expect(out.reply?.status, why).toBe(413);
      expect(String(out.reply?.json?.error ?? ''), why).toMatch(/^body_too_large/);
      expect(out.writtenAtReply).toBeGreaterThan(LIMIT);
      expect(out.closedByServer, `${out.writtenAtClose} bytes written`).toBe(true);
      // The limit, as much again thrown away, and what the socket buffers: not the 256 MiB the client would send.
      expect(out.writtenAtClose).toBeLessThan(2 * LIMIT + 32 * MiB);
    },
  );
});
