// Programs on their own (part 4 prepare_program, start_program; PROFILE "Programs").

import { describe, expect, test } from 'vitest';
import type { Spec } from '../model.ts';
import { config, labels, ready, req } from './test-kit.ts';

describe('programs (part 4 prepare_program, start_program; PROFILE "Programs")', () => {
  const c = config();
  const startProgram: Spec = { op: 'start_program', id: 'current', s: 'current', g: 'current' };
  test('generation 0 in the header is invalid_control_generation before the fence; a file without program_id is program_identity_missing', () => {
    expect(labels(c, ready(), req({ op: 'prepare_program', prog: 'a', s: 'current', g: 'zero' }, 0n))).toEqual(['invalid_control_generation']);
    expect(labels(c, ready(), req({ op: 'prepare_program', prog: 'no_id', s: 'current', g: 'current' }))).toEqual(['program_identity_missing']);
  });
  test('start_program finds the newest prepared program by identity; no such identity is program_identity_mismatch; another executing is program_already_executing', () => {
    const m = ready();
    m.handles.set('2', { n: 2n, state: 'prepared', core: 0, session: m.grant!.session, ioOn: false, epoch: 0, bit: 1, kind: 'program', ident: '{"p":1}' });
    m.maxHandle = 2n;
    expect(labels(c, m, req(startProgram, 5n, { ident: '{"p":1}' }))).toEqual([200]);
    expect(labels(c, m, req(startProgram, 5n, { ident: '{"p":2}' }))).toEqual(['program_identity_mismatch']);
    m.handles.set('3', { n: 3n, state: 'started', core: 0, session: m.grant!.session, ioOn: false, epoch: 0, bit: 1, kind: 'program', ident: '{"p":3}', startCycle: 0n });
    expect(labels(c, m, req(startProgram, 5n, { ident: '{"p":1}' }))).toEqual(['program_already_executing']);
  });
});
