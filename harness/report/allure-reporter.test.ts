// The Allure results writer of hil run (harness/report/allure-reporter.ts): the FileSystemWriter's file
// names and contents, nothing left under a temporary name.

import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSystemWriter } from 'allure-js-commons/sdk/reporter';
import { expect, test } from 'vitest';
import { UnsyncedWriter } from './allure-reporter.ts';

test('writes the same files with the same bytes as allure-js-commons FileSystemWriter, and no temporary file stays', () => {
  const a = mkdtempSync(join(tmpdir(), 'hil-allure-a-'));
  const b = mkdtempSync(join(tmpdir(), 'hil-allure-b-'));
  const src = join(mkdtempSync(join(tmpdir(), 'hil-allure-src-')), 'evidence.txt');
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
  }
});
