// Minimal client of document 1's control service over its Unix socket (HTTP/1.1, JSON envelope).
import http from "node:http";

export const REQUEST_SCHEMA = "svc.rt-control.request.v1";

export interface ControlReply {
  status: number;
  body: Record<string, unknown>;
}

export class ControlError extends Error {
  constructor(public readonly code: string, public readonly detail: string, public readonly reply?: Record<string, unknown>) {
    super(`${code}: ${detail}`);
  }
}

/** Leading catalogue label of a control-service error string ("label: diagnostic" -> "label"). */
export function leadingLabel(error: string): string {
  const m = /^([a-z0-9_]+)/.exec(error);
  return m ? m[1]! : "control_unknown_outcome";
}

export function rawRequest(
  socketPath: string,
  method: string,
  path: string,
  body?: Buffer | string,
  headers: Record<string, string> = {},
  timeoutMs = 10000,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; data: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, method, path, headers: { host: "localhost", ...headers }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, data: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error("control service timeout")));
    req.on("error", reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

export class ControlClient {
  constructor(public readonly socketPath: string) {}

  private async json(method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}, timeoutMs = 10000): Promise<ControlReply> {
    let r;
    try {
      r = await rawRequest(this.socketPath, method, path, body, headers, timeoutMs);
    } catch (e) {
      throw new ControlError("cell_unreachable", (e as Error).message);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(r.data.toString("utf8"));
    } catch {
      throw new ControlError("control_unknown_outcome", `control service answered ${r.status} with a non-JSON body`);
    }
    if (typeof parsed !== "object" || parsed === null) throw new ControlError("control_unknown_outcome", "control reply is not an object");
    return { status: r.status, body: parsed as Record<string, unknown> };
  }

  /** GET observation; returns `data` or throws ControlError. */
  async observe(path: string, timeoutMs = 5000): Promise<Record<string, unknown>> {
    const r = await this.json("GET", path, undefined, {}, timeoutMs);
    if (r.status !== 200) throw refusal(r.body);
    return (r.body["data"] ?? {}) as Record<string, unknown>;
  }

  /** POST /v1/control; returns the whole Response on 200, throws ControlError on refusal. */
  async control(operation: string, fields: Record<string, unknown> = {}, timeoutMs = 10000): Promise<Record<string, unknown>> {
    const body = JSON.stringify({ schema: REQUEST_SCHEMA, operation, ...fields });
    const r = await this.json("POST", "/v1/control", body, { "content-type": "application/json" }, timeoutMs);
    if (r.status !== 200) throw refusal(r.body);
    return r.body;
  }

  /** POST /v1/program (prepare_program) with the fence in headers. */
  async prepareProgram(blob: Buffer, session: string, generation: number): Promise<Record<string, unknown>> {
    const r = await this.json("POST", "/v1/program", blob, {
      "content-type": "application/octet-stream",
      "x-control-session": session,
      "x-control-generation": String(generation),
    }, 60000);
    if (r.status !== 200) throw refusal(r.body);
    return r.body;
  }

  async telemetry(after: number): Promise<Buffer> {
    let r;
    try {
      r = await rawRequest(this.socketPath, "GET", `/v1/telemetry?after=${after}`, undefined, {}, 5000);
    } catch (e) {
      throw new ControlError("cell_unreachable", (e as Error).message);
    }
    if (r.status !== 200) {
      let b: Record<string, unknown> = {};
      try { b = JSON.parse(r.data.toString("utf8")) as Record<string, unknown>; } catch { /* keep empty */ }
      throw refusal(b);
    }
    return r.data;
  }
}

function refusal(body: Record<string, unknown>): ControlError {
  const err = typeof body["error"] === "string" ? (body["error"] as string) : "control_unknown_outcome: no error label";
  return new ControlError(leadingLabel(err), err, body);
}
