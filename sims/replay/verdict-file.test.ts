// The stack's side of the verdict file: a verdict matching fixtures/contract/replay-verdict.schema.json is
// written as it is; one that does not (a field the harness does not know, a count of the wrong type) is
// written as a refusal naming the problems, which the harness reads as such, and said once on stderr. The
// real pacer's verdict goes through the same check in pacer.test.ts (the crash test reads it back).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test, vi } from 'vitest';
import { parseVerdictFile, type ReplayVerdict } from '../../fixtures/contract/replay-verdict.ts';
import { writeVerdictFile } from './verdict-file.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-verdict-file-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

const reads = { recorded: 0, served: 0, missed: 0 };
const VERDICT: ReplayVerdict = {
  file: '/r/t.hilrec',
  mode: 'strict',
  run: 'suites/x.test.ts > t',
  recorded: { frames: 10, complete: true, requests: 2, outputs: 3 },
  cycles: 10,
  requests_matched: 2,
  outputs_matched: 3,
  requests_unsent: 0,
  requests_extra: 0,
  first_unsent: null,
  renewals_replayed: 0,
  live_renewals: 0,
  service_clock: 'recorded',
  expiries_replayed: 0,
  outputs_missing: 0,
  pace: 1,
  status_reads: reads,
  telemetry_reads: reads,
  holds_lost: [{ kind: 'status_read', cycle: 4, detail: 'publication 3' }],
  divergence: { kind: 'bus', cycle: 7, bus: { kind: 'diverged', file: '/r/t.hilrec', mode: 'strict', cycle: 7, time_ns: 7e6, axis: 1, axis_id: 'J2', field: 'controlword', expected: 15, actual: 7, recent: [{ cycle: 6, kind: 'request', data: { t: 'arm' }, host_ns: '12' }] } },
  end: null,
  wall_ms: 12,
  recorded_ms: 10,
};

test('a verdict that matches the schema is written as it is, and reads back as the same verdict', () => {
  const file = join(DIR, 'ok.json');
  writeVerdictFile(file, VERDICT);
  expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(VERDICT);
  expect(parseVerdictFile(readFileSync(file, 'utf8'))).toEqual({ verdict: VERDICT });
});

test('a verdict the schema does not allow is written as a refusal naming every problem, said once on stderr', () => {
  const said = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    // a field added on the stack's side only, and a count that is not one
    const bad = { ...VERDICT, replay_ratio: 0.5, cycles: -1 } as unknown as ReplayVerdict;
    const file = join(DIR, 'bad.json');
    writeVerdictFile(file, bad);
    const written = JSON.parse(readFileSync(file, 'utf8')) as { refused: { code: string; problems: string[] } };
    expect(Object.keys(written)).toEqual(['refused']);
    expect(written.refused.code).toBe('REPLAY_VERDICT_INVALID');
    expect(written.refused.problems).toEqual(expect.arrayContaining(['/: must NOT have additional properties (replay_ratio)', '/cycles: must be >= 0']));
    // the harness reads it as a refusal, with the problems, never as a verdict
    const read = parseVerdictFile(readFileSync(file, 'utf8'));
    expect(read).toEqual({ problem: expect.stringMatching(/^the stack refused its own verdict, which did not match fixtures\/contract\/replay-verdict\.schema\.json: .*replay_ratio/) });
    writeVerdictFile(file, bad);
    const lines = said.mock.calls.map((c) => String(c[0])).filter((l) => l.includes('replay-verdict.schema.json'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^replay: the verdict does not match fixtures\/contract\/replay-verdict\.schema\.json, written as a refusal: .*replay_ratio/);
  } finally {
    said.mockRestore();
  }
});

test('a verdict that cannot be written (no such directory) does not throw: the core runs on', () => {
  expect(() => writeVerdictFile(join(DIR, 'missing', 'verdict.json'), VERDICT)).not.toThrow();
});
