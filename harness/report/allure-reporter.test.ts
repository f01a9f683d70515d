// The Allure results writer of hil run (harness/report/allure-reporter.ts): the FileSystemWriter's file
// names and contents, nothing left under a temporary name.

import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSystemWriter } from 'allure-js-commons/sdk/reporter';
import { expect, test } from 'vitest';
import { allureStatusOf, UnsyncedWriter } from './allure-reporter.ts';

test('writes the same files with the same bytes as allure-js-commons FileSystemWriter, and no temporary file stays', () => {
  const a = mkdtempSync(join(tmpdir(), 'hil-allure-a-'));
  const b = mkdtempSync(join(tmpdir(), 'hil-allure-b-'));
  const srcDir = mkdtempSync(join(tmpdir(), 'hil-allure-src-'));
  const src = join(srcDir, 'evidence.txt');
  writeFileSync(src, 'transcript bytes\n');
  try {
    for (const w of [new FileSystemWriter({ resultsDir: join(a, 'r') }), new UnsyncedWriter({ resultsDir: join(b, 'r') })]) {
      w.writeResult({ uuid: 'u1', name: 't', status: 'passed' } as never);
      w.writeGroup({ uuid: 'g1', children: ['u1'] } as never);
      w.writeAttachment('x-attachment.json', Buffer.from('{"k":1}'));
      w.writeAttachmentFromPath('y-attachment.txt', src);
      w.writeEnvironmentInfo({ node: 'v20', target: 'sim' });
      w.writeCategoriesDefinitions([{ name: 'c', matchedStatuses: ['failed'] }] as never);
    }
    const list = (d: string) => readdirSync(join(d, 'r')).sort();
    expect(list(b)).toEqual(list(a));
    expect(list(b).some((n) => n.startsWith('.allure-write-'))).toBe(false);
    for (const n of list(a)) expect(readFileSync(join(b, 'r', n), 'utf8'), n).toBe(readFileSync(join(a, 'r', n), 'utf8'));
  } finally {
    rmSync(a, { recursive: true, force: true });
    rmSync(b, { recursive: true, force: true });
    rmSync(srcDir, { recursive: true, force: true });
  }
});

test("a failed test's Allure status follows the run's verdict rule, not only its first error (harness/report/verdict.ts testStateOf)", () => {
  const typeError = { name: 'TypeError', message: "Cannot read properties of undefined (reading 'execution')" };
  const limit = { name: 'HarnessError', message: 'measured outside the limit', code: 'HIL_ERR_MEASUREMENT_LIMIT' };
  const assertion = { name: 'AssertionError', message: 'expected 409 to be 200', showDiff: true, actual: 409, expected: 200 };
  const envError = { name: 'HarnessError', message: 'stack did not start', code: 'HIL_ERR_TOOL_FAILED' };
  // allure-vitest would call the first one broken (a TypeError): one error says the target broke a rule
  expect(allureStatusOf('fail', [typeError, limit])).toBe('failed');
  expect(allureStatusOf('fail', [assertion])).toBe('failed');
  // every error the harness's or the environment's: broken, as the run's errored
  expect(allureStatusOf('fail', [typeError])).toBe('broken');
  expect(allureStatusOf('fail', [envError, typeError])).toBe('broken');
  expect(allureStatusOf('fail', [])).toBe('failed'); // no error recorded: failed, as testStateOf says
  expect(allureStatusOf('pass', [])).toBeUndefined();
  expect(allureStatusOf('skip', undefined)).toBeUndefined();
});
