// Where per-test recordings live and how the replay target finds them (RecordingStore, the one place that
// names them): keyed by target and machine digest; the same test under another digest is stale (both digests
// named); none at all is "not recorded"; a missing recordings directory is its own error. Variants and core
// incarnations sit beside the test's recording.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { scratchDir } from '../fixture.ts';
import { enterTest, leaveTest } from './pertest.ts';
import { RecordingStore, stackOptionsJson, variantOptionsJson } from './recording-store.ts';
import { cannotStartRemote, startsStacks } from './remote.ts';
import { replayPrecheck, replayTarget, STEPPED_FORMAT_2 } from './replay.ts';

const DIR = mkdtempSync(join(tmpdir(), 'hil-pertest-'));
afterAll(() => rmSync(DIR, { recursive: true, force: true }));
const A = 'a'.repeat(64);
const B = 'b'.repeat(64);
const ID = 'suites/machine/home.test.ts > Home lifetime > a Home whose HTTP reply is lost (client gone) still completes';
const store = new RecordingStore(DIR);
const R = new RecordingStore('/r');

function put(sha: string, id: string): string {
  const p = store.testRecording(sha, id);
  mkdirSync(join(p, '..'), { recursive: true });
  writeFileSync(p, 'x');
  return p;
}

test('a recording path is keyed by target, machine digest and test file, and differs for every test id', () => {
  const p = R.testRecording(A, ID);
  expect(p).toMatch(new RegExp(`^/r/sim/${A}/suites_machine_home\\.test\\.ts/Home_lifetime_a_Home_whose_HTTP_reply_is_lost_client_gone_still_completes-[0-9a-f]{12}\\.hilrec$`));
  // names that slug alike still get their own file (the hash of the whole id)
  expect(R.testRecording(A, `${ID}!`)).not.toBe(p);
  expect(R.testRecording(B, ID)).not.toBe(p);
});

test('lookup: found under the current digest; stale under another (both digests); otherwise not recorded', async () => {
  expect(store.find(A, ID)).toEqual({ kind: 'not_recorded' });
  const atB = put(B, ID);
  expect(store.find(A, ID)).toEqual({ kind: 'stale', path: atB, recordedMachine: B });
  const err = await replayPrecheck(ID, { recordings: DIR, machineSha256: A }).catch((e: unknown) => e as Error & { code: string });
  expect(err).toMatchObject({ code: 'HIL_ERR_REPLAY_STALE', verdict: 'error' });
  expect((err as Error).message).toContain(A);
  expect((err as Error).message).toContain(B);
  const atA = put(A, ID);
  expect(store.find(A, ID)).toEqual({ kind: 'found', path: atA });
  expect(await replayPrecheck(ID, { recordings: DIR, machineSha256: A })).toEqual({ path: atA });
  expect(await replayPrecheck(`${ID} (other)`, { recordings: DIR, machineSha256: A })).toEqual({ skip: expect.stringMatching(/^not recorded \(/) });
  await expect(replayPrecheck(ID, { recordings: join(DIR, 'nope'), machineSha256: A })).rejects.toMatchObject({ code: 'HIL_ERR_REPLAY_MISSING' });
  await expect(replayPrecheck(ID, { machineSha256: A })).rejects.toMatchObject({ code: 'HIL_ERR_REPLAY_MISSING' });
});

test('a test recorded without a stack: its sidecar is found (stackless, with its property seeds); under another digest it is stale; with a recording beside it, the recording wins', async () => {
  const id = `${ID} (no stack)`;
  expect(store.find(A, id)).toEqual({ kind: 'not_recorded' });
  const sideB = store.writeStackless(B, id, {});
  expect(store.find(A, id)).toEqual({ kind: 'stale', path: sideB.replace(/\.json$/, '.hilrec'), recordedMachine: B });
  const sideA = store.writeStackless(A, id, { p: { seed: 5, numRuns: 2 } });
  expect(sideA).toBe(store.testRecording(A, id).replace(/\.hilrec$/, '.json'));
  expect(store.find(A, id)).toEqual({ kind: 'stackless', sidecar: sideA });
  expect(await replayPrecheck(id, { recordings: DIR, machineSha256: A })).toEqual({ stackless: sideA });
  expect(RecordingStore.readSidecar(sideA)).toMatchObject({ test: id, stack: false, machine_sha256: A, properties: { p: { seed: 5, numRuns: 2 } } });
  // A sidecar of a recorded stack (no stack: false) without its recording is not recorded.
  const other = `${ID} (sidecar only)`;
  const p = store.testRecording(A, other);
  mkdirSync(join(p, '..'), { recursive: true });
  writeFileSync(p.replace(/\.hilrec$/, '.json'), JSON.stringify({ test: other, stack: true }));
  expect(store.find(A, other)).toEqual({ kind: 'not_recorded' });
  const rec = put(A, id);
  expect(store.find(A, id)).toEqual({ kind: 'found', path: rec });
});

const SCRATCH = scratchDir('hil-anchors');

test('variants and core incarnations: the n-th of a test sits beside its recording; options compare without temporary directories, keys sorted, bigints as digits', () => {
  const base = R.testRecording(A, 'suites/x.test.ts > t');
  expect(R.variantRecording(A, 'suites/x.test.ts > t', 2)).toBe(base.replace(/\.hilrec$/, '.variant-2.hilrec'));
  expect(RecordingStore.sidecar(base)).toBe(base.replace(/\.hilrec$/, '.json'));
  // a restarted core's recording and verdict: the first keeps its name, the n-th gets .core-<n> before the extension
  expect(RecordingStore.incarnation(base, 1)).toBe(base);
  expect(RecordingStore.incarnation(base, 3)).toBe(base.replace(/\.hilrec$/, '.core-3.hilrec'));
  expect(RecordingStore.incarnation(R.variantRecording(A, 'suites/x.test.ts > t', 2), 2)).toBe(base.replace(/\.hilrec$/, '.variant-2.core-2.hilrec'));
  expect(RecordingStore.incarnation('/v/verdict.json', 2)).toBe('/v/verdict.core-2.json');
  expect(RecordingStore.runName('suites/x.test.ts > t')).toBe('suites/x.test.ts > t');
  expect(RecordingStore.runName('suites/x.test.ts > t', 2)).toBe('suites/x.test.ts > t (variant 2)');
  const t = enterTest('suites/x.test.ts > t');
  expect([t.peekVariant(), t.takeVariant(), t.peekVariant(), t.takeVariant()]).toEqual([1, 1, 2, 2]);
  expect(enterTest('suites/x.test.ts > u').peekVariant()).toBe(1); // counted per test
  leaveTest();
  const a = variantOptionsJson({ machine: '/tmp/hil-ten-axis-oGVfNt/ten-axis.json', initialGeneration: 18446744073709551614n, anchorStore: { kind: 'directory', dir: '/tmp/hil-anchors-ohBjW5' } });
  const b = variantOptionsJson({ anchorStore: { dir: '/tmp/hil-anchors-Zz9x1Q', kind: 'directory' }, initialGeneration: 18446744073709551614n, machine: '/var/tmp/x/ten-axis.json' });
  expect(a).toBe(b);
  expect(a).toBe('{"anchorStore":{"dir":"hil-anchors","kind":"directory"},"initialGeneration":"18446744073709551614","machine":"ten-axis.json"}');
  // A suite's scratch directory (fixture.ts scratchDir) is named as mkdtemp names one: the same options on
  // every run (suites/machine/anchors.test.ts's replays were refused as stale when it was not).
  expect(variantOptionsJson({ anchorStore: { kind: 'directory', dir: SCRATCH } })).toBe('{"anchorStore":{"dir":"hil-anchors","kind":"directory"}}');
  // what does differ is still seen: another machine file name, another generation, a named machine
  expect(variantOptionsJson({ machine: '/tmp/d/eleven-axis.json' })).not.toBe(variantOptionsJson({ machine: '/tmp/d/ten-axis.json' }));
  expect(variantOptionsJson({ initialGeneration: 1n })).not.toBe(variantOptionsJson({ initialGeneration: 2n }));
  expect(variantOptionsJson({ machine: 'bench-two-axis' })).toBe('{"machine":"bench-two-axis"}');
});

test('a test\'s own stack (a remote listener stack): options compare without temporary paths, and differ when the stack does', () => {
  const a = stackOptionsJson('remote', { pairId: 'cell-remote-01', args: ['--machine', '/tmp/hil-timeouts-Ab12Cd/internet.json', '--config-cache', '/tmp/hil-timeouts-Ab12Cd/compiled'], variant: { machine: '/tmp/hil-x-oGVfNt/ten-axis.json', clock: 'stepped' } });
  const b = stackOptionsJson('remote', { pairId: 'cell-remote-01', args: ['--machine', '/tmp/hil-timeouts-Zz9x1Q/internet.json', '--config-cache', '/tmp/hil-timeouts-Zz9x1Q/compiled'], variant: { clock: 'stepped', machine: '/var/tmp/y/ten-axis.json' } });
  expect(a).toBe(b);
  expect(a).toBe('{"remote":{"args":["--machine","internet.json","--config-cache","compiled"],"pair_id":"cell-remote-01","variant":{"clock":"stepped","machine":"ten-axis.json"}}}');
  // certificates made for a stack are reduced like any other temporary path
  expect(stackOptionsJson('stack', { args: ['--remote-ca', '/tmp/hil-certs-Ab12Cd/pair/ca.crt'] })).toBe('{"stack":{"args":["--remote-ca","ca.crt"]}}');
  // what does differ is still seen: another pair id, another flag or value, the variant, the kind of stack
  const base = { pairId: 'cell-remote-01', args: ['--remote-jog-drift-ppb', '1000'] };
  for (const other of [
    stackOptionsJson('remote', { ...base, pairId: 'cell-remote-02' }),
    stackOptionsJson('remote', { ...base, args: ['--remote-jog-drift-ppb', '1'] }),
    stackOptionsJson('remote', { ...base, args: [] }),
    stackOptionsJson('remote', { ...base, variant: { clock: 'stepped' } }),
    stackOptionsJson('stack', base),
  ]) {
    expect(other).not.toBe(stackOptionsJson('remote', base));
  }
  // never mistaken for a variant's options: a variant has no option of that name
  expect(stackOptionsJson('remote', {})).not.toBe(variantOptionsJson({}));
});

test('replaying a test\'s own stack: not recorded, and a stepped clock recorded without its steps (format 2), are skip reasons; options other than recorded are refused as stale before any stack starts', async () => {
  const id = 'suites/remote/x.test.ts > own stack';
  const o = { recordings: DIR, machineSha256: A };
  const live = stackOptionsJson('remote', { pairId: 'cell-remote-01', args: ['--remote-jog-drift-ppb', '1000'] });
  const stack = { start: { args: ['--remote-listen', '127.0.0.1:0'] }, options: live };
  const run = enterTest(id);
  try {
    expect(replayTarget.cannotStartStack!(stack, o)).toMatch(/^not recorded \(no recording of variant 1 of this test/);
    const path = store.variantRecording(A, id, 1);
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, 'x');
    const sidecar = { test: id, variant: 1, options: JSON.parse(stackOptionsJson('remote', { pairId: 'cell-remote-01', args: ['--remote-jog-drift-ppb', '1'] })) as unknown };
    writeFileSync(path.replace(/\.hilrec$/, '.json'), JSON.stringify(sidecar));
    expect(replayTarget.cannotStartStack!(stack, o)).toBeUndefined();
    // on the stepped clock only a recording that holds the steps (its sidecar says so) replays
    expect(replayTarget.cannotStartStack!({ ...stack, variant: { clock: 'stepped' } }, o)).toBe(STEPPED_FORMAT_2);
    writeFileSync(path.replace(/\.hilrec$/, '.json'), JSON.stringify({ ...sidecar, steps: true }));
    expect(replayTarget.cannotStartStack!({ ...stack, variant: { clock: 'stepped' } }, o)).toBeUndefined();
    writeFileSync(path.replace(/\.hilrec$/, '.json'), JSON.stringify(sidecar));
    const err = (await replayTarget.startStack!(stack, o).then(
      () => new Error('started'),
      (e: unknown) => e,
    )) as Error & { code: string };
    expect(err).toMatchObject({ code: 'HIL_ERR_REPLAY_STALE' });
    expect(err.message).toContain('"--remote-jog-drift-ppb","1"]');
    expect(err.message).toContain('"--remote-jog-drift-ppb","1000"]');
    expect(run.peekVariant()).toBe(2); // the refused stack took its index: the test's next one is the next variant
  } finally {
    leaveTest();
  }
  expect(replayTarget.cannotStartStack!(stack, o)).toMatch(/shared by a describe block/);
});

test('remote stacks: the sim and replay targets start them, an external target without a listener says why not', () => {
  expect(startsStacks({ HIL_TARGET: 'sim' })).toBe(true);
  expect(startsStacks({ HIL_TARGET: 'replay' })).toBe(true);
  expect(startsStacks({ HIL_TARGET: 'external' })).toBe(false);
  expect(cannotStartRemote({}, { HIL_TARGET: 'external' })).toMatch(/^target external reaches no remote listener: give --remote-url URL and --remote-pair DIR/);
  expect(cannotStartRemote({}, { HIL_TARGET: 'rig' })).toMatch(/^target rig cannot start a stack with a remote listener/);
  expect(cannotStartRemote({ variant: { clock: 'stepped' } }, { HIL_TARGET: 'sim' })).toBeUndefined();
});

test('a replay without file filters runs the suite files its recordings hold (under any digest: a stale one is reported, not dropped); none held or all held: every file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'hil-files-'));
  try {
    const s = new RecordingStore(dir);
    const all = ['suites/grant/grant.test.ts', 'suites/machine/home.test.ts', 'suites/olp/jobs.test.ts', 'suites/telemetry/busy.test.ts'];
    const files = (o: { recordings?: string }) => replayTarget.files!(o, all);
    expect(files({ recordings: dir })).toBeUndefined(); // nothing recorded: every test skips with its reason, as before
    expect(files({})).toBeUndefined();
    const put = (sha: string, id: string) => {
      const p = s.testRecording(sha, id);
      mkdirSync(join(p, '..'), { recursive: true });
      writeFileSync(p, 'x');
    };
    put(A, ID);
    expect(files({ recordings: dir })).toEqual(['suites/machine/home.test.ts']);
    // A file recorded under another machine digest still runs (its tests answer HIL_ERR_REPLAY_STALE).
    put(B, 'suites/grant/grant.test.ts > acquire > a test');
    // A stackless sidecar counts; an empty directory does not.
    s.writeStackless(A, 'suites/telemetry/busy.test.ts > a test', {});
    mkdirSync(join(dir, 'sim', A, 'suites_olp_jobs.test.ts'), { recursive: true });
    expect(files({ recordings: dir })).toEqual(['suites/grant/grant.test.ts', 'suites/machine/home.test.ts', 'suites/telemetry/busy.test.ts']);
    put(A, 'suites/olp/jobs.test.ts > a test');
    expect(files({ recordings: dir })).toBeUndefined(); // all of them: a whole run, as without the narrowing
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
