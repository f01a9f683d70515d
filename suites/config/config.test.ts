// Compiled machine configuration (document 3 part 2), reached through the `hil config` process:
// golden digests and files of both fixtures, canonical identity text checked by the independent oracle,
// the exact file set of the digest-named directory, and that the directory is never overwritten.

import { chmod, cp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { digestClass, identityDigest, identityText, identityValue, parseIdentity, type IdentityLine } from '../../harness/oracle/identity.ts';
import { parseExact, type JsonExact } from '../../harness/oracle/json.ts';
import { afterAll, beforeAll } from 'vitest';
import { covers, describe, expect, test } from '../../harness/fixture.ts';
import { compileMany, hilConfig, isRefused, MACHINES, outcomes, type Compiled, type Outcome } from '../../harness/clients/config.ts';
import { readMachine, Workspace, writeJson, type JsonObj } from './toolkit.ts';
import { ROBOT_DESCRIPTION, ROBOT_DESCRIPTION_FILE, robotMachine } from './machines.ts';

const FIXTURES = ['nine-axis', 'bench-two-axis'] as const;
type Fixture = (typeof FIXTURES)[number];
const IDENTITIES = ['configuration.identity', 'configuration.base.identity', 'machine.identity', 'deployment.identity'] as const;

let ws: Workspace;
const fixture = {} as Record<Fixture, Compiled>;
/** Robot machines: description pinned from a file, pinned by digest only, not pinned. */
const robot = {} as Record<'file' | 'digest' | 'none', { json: JsonObj; out: Outcome }>;
let descriptionSha = '';

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await listFiles(join(dir, e.name), rel)));
    else out.push(rel);
  }
  return out.sort();
}

const compiled = (o: Outcome | undefined): Compiled => {
  if (!o || isRefused(o)) throw new Error(`expected a compiled configuration, got ${JSON.stringify(o)}`);
  return o;
};

const read = (c: Compiled, name: string) => readFile(join(c.dir, name));
const lines = async (c: Compiled, name: string): Promise<IdentityLine[]> => parseIdentity(await read(c, name));

/** Flatten a machine JSON the way docs/profile.md "Canonical identity text" does: dotted keys, array indices and lengths. */
function leaves(v: JsonExact, prefix = '', out: Array<{ key: string; value: string }> = []): Array<{ key: string; value: string }> {
  if (Array.isArray(v)) {
    out.push({ key: `${prefix}.length`, value: String(v.length) });
    v.forEach((x, i) => leaves(x, `${prefix}.${i}`, out));
  } else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) leaves(x, prefix ? `${prefix}.${k}` : k, out);
  } else if (v !== null) {
    out.push({ key: prefix, value: identityValue(v) });
  }
  return out;
}

beforeAll(async () => {
  ws = await Workspace.create('config');
  // The documented single-file form, once per fixture.
  for (const name of FIXTURES) {
    const r = await hilConfig(['compile', join(MACHINES, `${name}.json`), '--out', ws.out]);
    expect(r.code, r.stderr).toBe(0);
    const o = outcomes(r.stdout);
    expect(o).toHaveLength(1);
    expect(Object.keys(o[0]!).sort()).toEqual(['configuration_sha256', 'deployment_sha256', 'dir', 'machine_sha256']);
    fixture[name] = compiled(o[0]);
  }
  // Robot machines in one batch.
  await ws.write(ROBOT_DESCRIPTION, ROBOT_DESCRIPTION_FILE);
  descriptionSha = identityDigest(ROBOT_DESCRIPTION);
  const variants = {
    file: robotMachine({ description: true }),
    digest: robotMachine({ descriptionSha256: `sha256:${descriptionSha}` }),
    none: robotMachine(),
  };
  const keys = Object.keys(variants) as Array<keyof typeof variants>;
  const files = await Promise.all(keys.map((k) => ws.write(variants[k], `robot-${k}.json`)));
  const outs = await compileMany(files, ws.out);
  keys.forEach((k, i) => (robot[k] = { json: variants[k], out: outs[i]! }));
});

afterAll(async () => {
  await ws?.remove();
});

describe('golden fixtures', () => {
  for (const name of FIXTURES) {
    test(`${name}: the three digests equal the golden digests`, covers('rule:machine_config.configuration_sha256', 'rule:machine_config.machine_sha256', 'rule:machine_config.deployment_sha256'), async () => {
      const golden = JSON.parse(await readFile(join(MACHINES, 'expected', name, 'digests.json'), 'utf8')) as Record<string, string | null>;
      const c = fixture[name];
      expect({ configuration_sha256: c.configuration_sha256, machine_sha256: c.machine_sha256, deployment_sha256: c.deployment_sha256 }).toEqual({
        configuration_sha256: golden.configuration_sha256,
        machine_sha256: golden.machine_sha256,
        deployment_sha256: golden.deployment_sha256,
      });
      const files = await listFiles(c.dir);
      const base = files.includes('configuration.base.identity') ? identityDigest(await read(c, 'configuration.base.identity')) : null;
      expect(base).toBe(golden.configuration_base_sha256);
    });

    test(`${name}: every compiled file is byte-identical to the golden file`, covers('rule:machine_config.compiled_files', 'rule:machine_config.canonical_identity_text'), async () => {
      const goldenDir = join(MACHINES, 'expected', name);
      const golden = (await listFiles(goldenDir)).filter((f) => f !== 'digests.json');
      expect(await listFiles(fixture[name].dir)).toEqual(golden);
      for (const f of golden) expect(Buffer.compare(await read(fixture[name], f), await readFile(join(goldenDir, f))), f).toBe(0);
    });
  }
});

describe('canonical identity text (independent oracle)', () => {
  const all = () => [...FIXTURES.map((n) => [n, fixture[n]] as const), ...(['file', 'digest', 'none'] as const).map((k) => [`robot-${k}`, compiled(robot[k].out)] as const)];

  test('every identity file is sorted key=value lines with %.17g doubles and decimal integers', covers('rule:machine_config.canonical_identity_text'), async () => {
    for (const [name, c] of all()) {
      for (const f of (await listFiles(c.dir)).filter((x) => x.endsWith('.identity'))) {
        const ls = await lines(c, f); // throws OracleError on anything non-canonical
        expect(identityText(ls), `${name}/${f}`).toBe((await read(c, f)).toString('utf8'));
        expect(ls.length, `${name}/${f}`).toBeGreaterThan(0);
      }
    }
  });

  test('each digest is sha256 of its identity file and the directory is named by configuration_sha256', covers('rule:machine_config.configuration_sha256', 'rule:machine_config.machine_sha256', 'rule:machine_config.deployment_sha256', 'rule:machine_config.compiled_directory'), async () => {
    for (const [name, c] of all()) {
      expect(identityDigest(await read(c, 'configuration.identity')), name).toBe(c.configuration_sha256);
      expect(identityDigest(await read(c, 'machine.identity')), name).toBe(c.machine_sha256);
      expect(identityDigest(await read(c, 'deployment.identity')), name).toBe(c.deployment_sha256);
      expect(c.dir, name).toBe(join(ws.out, c.configuration_sha256));
      expect(c.configuration_sha256, name).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  test('machine.identity and deployment.identity split configuration.identity as docs/profile.md lists; base is it without io', covers('profile:config.digest_split', 'rule:machine_config.machine_sha256', 'rule:machine_config.deployment_sha256', 'rule:machine_config.base_identity_with_io'), async () => {
    for (const [name, c] of all()) {
      const conf = await lines(c, 'configuration.identity');
      const machine = await lines(c, 'machine.identity');
      const deployment = await lines(c, 'deployment.identity');
      expect(machine, name).toEqual(conf.filter((l) => digestClass(l.key) === 'machine'));
      expect(deployment, name).toEqual(conf.filter((l) => digestClass(l.key) === 'deployment'));
      if ((await listFiles(c.dir)).includes('configuration.base.identity')) {
        expect(await lines(c, 'configuration.base.identity'), name).toEqual(conf.filter((l) => !l.key.startsWith('io.')));
      }
    }
  });

  test('every field written in the machine JSON is a line of configuration.identity in canonical form', covers('rule:machine_config.configuration_sha256', 'rule:machine_config.canonical_identity_text'), async () => {
    const sources: Array<[string, JsonExact, Compiled]> = [
      ...FIXTURES.map((n) => [n, readMachine(n) as JsonExact, fixture[n]] as [string, JsonExact, Compiled]),
      ...(['file', 'digest', 'none'] as const).map((k) => [`robot-${k}`, parseExact(writeJson(robot[k].json)), compiled(robot[k].out)] as [string, JsonExact, Compiled]),
    ];
    for (const [name, json, c] of sources) {
      const conf = new Map((await lines(c, 'configuration.identity')).map((l) => [l.key, l.value]));
      for (const { key, value } of leaves(json)) expect(conf.get(key), `${name}: ${key}`).toBe(value);
    }
  });

  test('coordinate identities are canonical identity texts and their digests match', covers('rule:machine_config.canonical_identity_text', 'rule:machine_config.compiled_files'), async () => {
    for (const [name, c] of all()) {
      const doc = JSON.parse((await read(c, 'coordinate.identity.json')).toString('utf8')) as { schema: string; axes: Array<{ index: number; id: string; coordinate_sha256: string; identity: string[] }> };
      expect(doc.schema).toBe('cell.coordinate.identity.v1');
      const axesCount = (await lines(c, 'configuration.identity')).find((l) => l.key === 'axes.length')!.value;
      expect(doc.axes.map((a) => a.index), name).toEqual([...Array(Number(axesCount)).keys()]);
      for (const a of doc.axes) {
        const text = a.identity.map((l) => `${l}\n`).join('');
        parseIdentity(text);
        expect(identityDigest(text), `${name} axis ${a.id}`).toBe(a.coordinate_sha256);
      }
    }
  });
});

describe('the compiled directory', () => {
  const BASE_FILES = ['argv.json', 'axes.conf', 'configuration.identity', 'coordinate.identity.json', 'deployment.identity', 'machine.identity', 'resources.json'];
  const want = (...extra: string[]) => [...BASE_FILES, ...extra].sort();

  test('holds exactly the documented files; configuration.base.identity only with an io block', covers('rule:machine_config.compiled_files', 'rule:machine_config.base_identity_with_io', 'field:MachineConfig.io'), async () => {
    expect(readMachine('nine-axis').io).toBeDefined();
    expect(readMachine('bench-two-axis').io).toBeUndefined();
    expect(await listFiles(fixture['nine-axis'].dir)).toEqual(want('configuration.base.identity'));
    expect(await listFiles(fixture['bench-two-axis'].dir)).toEqual(want());
    expect(await listFiles(compiled(robot.none.out).dir)).toEqual(want());
  });

  test('robot.json only when a robot description is pinned; the description is stored under resources/<sha256>', covers('rule:machine_config.robot_json_when_pinned', 'rule:machine_config.compiled_files', 'field:MachineConfig.robot'), async () => {
    const file = compiled(robot.file.out);
    const digest = compiled(robot.digest.out);
    expect(await listFiles(file.dir)).toEqual(want('robot.json', `resources/${descriptionSha}`));
    expect(await listFiles(digest.dir)).toEqual(want('robot.json'));
    expect(await listFiles(compiled(robot.none.out).dir)).toEqual(want());

    expect((await read(file, `resources/${descriptionSha}`)).toString('utf8')).toBe(ROBOT_DESCRIPTION);
    expect(JSON.parse((await read(file, 'resources.json')).toString('utf8'))).toEqual([{ name: ROBOT_DESCRIPTION_FILE, sha256: descriptionSha, bytes: Buffer.byteLength(ROBOT_DESCRIPTION) }]);
    expect(JSON.parse((await read(digest, 'resources.json')).toString('utf8'))).toEqual([]);
    for (const c of [file, digest]) {
      const robotJson = JSON.parse((await read(c, 'robot.json')).toString('utf8')) as Record<string, unknown>;
      expect(robotJson.description_sha256).toBe(`sha256:${descriptionSha}`);
      expect(robotJson.model_id).toBe('arm-2');
      // Provenance strings are kept in the canonical robot block.
      expect((robotJson.joints as Array<Record<string, unknown>>)[0]!.min_source).toBe('vendor datasheet rev C');
    }
    // The pinned digest is a machine fact: pinning by file or by digest gives the same machine_sha256.
    expect(file.machine_sha256).toBe(digest.machine_sha256);
    expect(file.deployment_sha256).not.toBe(digest.deployment_sha256); // robot.description (the file name) is deployment
  });

  test('is immutable: files are read-only, nothing temporary is left, an identical compile reuses it', covers('profile:config.files', 'rule:machine_config.compiled_directory'), async () => {
    for (const c of [...Object.values(fixture), compiled(robot.file.out)]) {
      for (const f of await listFiles(c.dir)) expect((await stat(join(c.dir, f))).mode & 0o222, f).toBe(0);
    }
    expect((await readdir(ws.out)).filter((n) => !/^[0-9a-f]{64}$/.test(n))).toEqual([]);

    const before = await stat(join(fixture['nine-axis'].dir, 'configuration.identity'));
    const [again] = await compileMany([join(MACHINES, 'nine-axis.json')], ws.out);
    expect(compiled(again).dir).toBe(fixture['nine-axis'].dir);
    expect(compiled(again).configuration_sha256).toBe(fixture['nine-axis'].configuration_sha256);
    expect((await stat(join(fixture['nine-axis'].dir, 'configuration.identity'))).mtimeMs).toBe(before.mtimeMs);
  });

  test('an existing directory with different content is refused, never overwritten', covers('rule:machine_config.compiled_directory'), async () => {
    const out2 = join(ws.dir, 'out-tampered');
    const dir = join(out2, fixture['bench-two-axis'].configuration_sha256);
    await cp(fixture['bench-two-axis'].dir, dir, { recursive: true });
    const victim = join(dir, 'axes.conf');
    await chmod(victim, 0o644);
    await writeFile(victim, 'tampered\n');
    const [o] = await compileMany([join(MACHINES, 'bench-two-axis.json')], out2);
    expect(isRefused(o!) && o.error).toBe('config_directory_conflict');
    expect(await readFile(victim, 'utf8')).toBe('tampered\n');
  });
});

describe('hil config command', () => {
  test('a refusal is one JSON line with error, path and message, exit 1; usage errors exit 2; --help exits 0', covers('profile:config.compile_command', 'rule:machine_config.compiled_directory', 'limit:machine_schema_version'), async () => {
    const bad = await ws.write({ ...readMachine('bench-two-axis'), schema_version: 2n });
    const refused = await hilConfig(['compile', bad, '--out', ws.out]);
    expect(refused.code).toBe(1);
    const [line, ...rest] = outcomes(refused.stdout);
    expect(rest).toEqual([]);
    expect(Object.keys(line!).sort()).toEqual(['error', 'message', 'path']);
    expect(line).toMatchObject({ error: 'config_range', path: 'schema_version' });
    expect((await readdir(ws.out)).filter((n) => n.startsWith('.tmp'))).toEqual([]);

    const [noOut, help] = await Promise.all([hilConfig(['compile', bad]), hilConfig(['--help'])]);
    expect(noOut.code).toBe(2);
    expect(noOut.stdout).toBe('');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/compile FILE --out DIR/);
  });
});
