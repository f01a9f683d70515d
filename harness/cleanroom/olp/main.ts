// blind-olp's command line: `main.ts --listen HOST:PORT [--cells FILE.json] [--planner-url URL]
// [--robot-store DIR] [--heartbeat-ms N] [--no-catalogue]` starts the server (server.ts) and prints one
// ready {"olp": URL} line; SIGTERM and SIGINT close it.
import fs from "node:fs";
import { BlindOlp, type BlindCell } from "./server.js";
import { isObj } from "./http.js";

function parseArgs(argv: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--no-catalogue") { out["no-catalogue"] = "1"; continue; }
    if (!a.startsWith("--")) throw new Error(`unexpected argument ${a}`);
    const eq = a.indexOf("=");
    if (eq > 0) out[a.slice(2, eq)] = a.slice(eq + 1);
    else { out[a.slice(2)] = argv[i + 1] ?? ""; i++; }
  }
  return out;
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const listen = a["listen"] ?? "127.0.0.1:8794";
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m) throw new Error("--listen HOST:PORT");
  let cells: BlindCell[] = [];
  if (a["cells"]) {
    const j = JSON.parse(fs.readFileSync(a["cells"], "utf8")) as unknown;
    cells = (Array.isArray(j) ? j : isObj(j) && Array.isArray(j["cells"]) ? j["cells"] : []) as BlindCell[];
  }
  const olp = new BlindOlp({
    cells, plannerUrl: a["planner-url"], robotStoreDir: a["robot-store"], host: m[1]!.replace(/^\[|\]$/g, ""), port: Number(m[2]),
    heartbeatMs: a["heartbeat-ms"] ? Number(a["heartbeat-ms"]) : undefined, catalogue: a["no-catalogue"] ? false : undefined,
  });
  const url = await olp.listen();
  process.stdout.write(`ready ${JSON.stringify({ olp: url })}\n`);
  const shut = () => { void olp.close().then(() => process.exit(0)); };
  process.on("SIGTERM", shut);
  process.on("SIGINT", shut);
}

const isMain = (() => {
  try { return process.argv[1] !== undefined && fs.realpathSync(process.argv[1]) === fs.realpathSync(new URL(import.meta.url).pathname); } catch { return false; }
})();
if (isMain) {
  main().catch((e: unknown) => { process.stderr.write(`${(e as Error).message}\n`); process.exit(2); });
}
