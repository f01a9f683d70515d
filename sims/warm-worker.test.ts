// The warm worker (warm-worker.ts): kept between jobs without holding the process open, so a stack host's
// session that started it leaves nothing running (sims/sessions.ts) and the host serves the next session.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, test } from 'vitest';
import { leftBehind } from './sessions.ts';
import { WarmWorker } from './warm-worker.ts';

test('a warm worker answers by id and, kept between jobs, is no resource the process still waits on', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'warm-worker-'));
  const entry = join(dir, 'echo.mjs');
  writeFileSync(entry, "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', (m) => parentPort.postMessage({ id: m.id, n: m.bytes.length, tag: m.tag }));\n");
  const w = new WarmWorker<{ id: number; n: number; tag: string }>(pathToFileURL(entry), 'echo');
  const before = process.getActiveResourcesInfo();
  try {
    const [a, b] = await Promise.all([w.ask(new Uint8Array(3), { tag: 'a' }), w.ask(new Uint8Array(5), { tag: 'b' })]);
    expect([a.n, a.tag, b.n, b.tag]).toEqual([3, 'a', 5, 'b']);
    expect(leftBehind(before)).toEqual([]);
  } finally {
    await w.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
