// GET /v1/resources/<sha256> (document 1 part 4 "Observation endpoints"): the content-addressed compiled
// resources of the machine configuration (`resources.json` and `resources/<sha256 hex>` of the compiled
// directory, document 3). Only the remote listener routes here; unknown digests answer 404 resource_unknown.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { Refusal } from './envelope.ts';

const DIGEST_RE = /^[0-9a-f]{64}$/;

export class Resources {
  private known?: Promise<Set<string>>;

  constructor(private readonly dir: string) {}

  private list(): Promise<Set<string>> {
    this.known ??= readFile(join(this.dir, 'resources.json'), 'utf8')
      .then((t) => new Set((JSON.parse(t) as Array<{ sha256: string }>).map((r) => r.sha256)))
      .catch(() => new Set<string>());
    return this.known;
  }

  /** Answer one resource request; `refuse` sends a refusal envelope. */
  async serve(res: ServerResponse, digest: string, refuse: (e: Refusal) => void): Promise<void> {
    if (!DIGEST_RE.test(digest) || !(await this.list()).has(digest)) {
      return refuse(new Refusal(404, 'resource_unknown', `no compiled resource with sha256 ${digest.slice(0, 80)}`));
    }
    const bytes = await readFile(join(this.dir, 'resources', digest));
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': bytes.length });
    res.end(bytes);
  }
}
