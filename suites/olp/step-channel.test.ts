// The reference STEP worker behind /cadquery/topology (docs/profile.md "OLP server: worker bridge" and
// "OLP server: worker operations"): OpenCascade prints what it finds wrong in a STEP file, and none of that
// may reach the bridge as a reply. Malformed files of every kind are refused 400 invalid_request (part 7:
// the worker refused the request) and the same worker then reads a valid file.

import { readFileSync } from 'node:fs';
import { describe, expect, profile } from '../../harness/fixture.ts';
import { expectAuthoringError, needsConfigured, olpTest as test, useOlp } from './toolkit.ts';

const FILLET = readFileSync(new URL('../../fixtures/step/fillet-joint.step', import.meta.url));

describe('the STEP worker\'s reply channel (profile)', () => {
  test(
    'random bytes, a truncated fixture and plain text are each refused 400 invalid_request, and a valid file is read right after',
    { ...profile('profile:olp.worker_channel'), timeout: 120_000 },
    async ({ olps, skip }) => {
      const o = useOlp({ skip }, await olps.open('step-channel', () => ({ planner: 'none', workers: { cad: 'builtin', pool: 1 } })));
      needsConfigured({ skip }, o, 'the reference STEP worker with a pool of one');
      const malformed: Array<[string, Buffer]> = [
        ['random bytes', Buffer.from(Array.from({ length: 4096 }, (_x, i) => (i * 2654435761) % 251))],
        ['a truncated fixture', FILLET.subarray(0, Math.floor(FILLET.length / 2))],
        ['text', Buffer.from('this is not a STEP file\n')],
      ];
      for (const [what, bytes] of malformed) {
        const r = await o.client.post('/cadquery/topology', { operation: 'extract_topology', step_base64: bytes.toString('base64') });
        expectAuthoringError(r, 400, 'invalid_request');
        expect(r.json.error, what).not.toMatch(/frame|worker/);
      }
      const ok = await o.client.post('/cadquery/topology', { operation: 'extract_topology', step_base64: FILLET.toString('base64') });
      expect(ok.status, ok.text.slice(0, 300)).toBe(200);
      expect(ok.json.result.solids.map((x: any) => [x.id, x.faces.length])).toEqual([['solid-0', 6], ['solid-1', 6]]);
    },
  );
});
