// blind-olp's HTTP plumbing (server.ts decision 20): the error a route throws, bounded body reading, JSON
// parsing that refuses trailing data, and replies gzip-compressed when accepted (document 3 part 2).
import http from "node:http";
import zlib from "node:zlib";

export class HttpError extends Error {
  constructor(public readonly status: number, public readonly code: string, public readonly detail: string, public readonly extra: Record<string, unknown> = {}) {
    super(`${code}: ${detail}`);
  }
}

export function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function isLoopback(host: string): boolean {
  return host === "127.0.0.1" || host === "localhost" || host === "::1" || host.startsWith("127.");
}

export function tryJson(raw: Buffer): unknown {
  try { return JSON.parse(raw.toString("utf8")); } catch { return undefined; }
}

export function parseJson(raw: Buffer): Record<string, unknown> {
  if (raw.length === 0) return {};
  let v: unknown;
  try { v = JSON.parse(raw.toString("utf8")); } catch { throw new HttpError(400, "invalid_json", "body is not one JSON value (trailing data is refused)"); }
  if (!isObj(v)) throw new HttpError(400, "invalid_json", "body must be a JSON object");
  return v;
}

export function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? "0");
    if (declared > limit) {
      req.resume();
      reject(new HttpError(413, "payload_too_large", `body over ${limit} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    req.on("data", (c: Buffer) => {
      if (over) return;
      n += c.length;
      if (n > limit) { over = true; reject(new HttpError(413, "payload_too_large", `body over ${limit} bytes`)); return; }
      chunks.push(c);
    });
    req.on("end", () => { if (!over) resolve(Buffer.concat(chunks)); });
    req.on("error", reject);
  });
}

export function isBase64(s: string): boolean {
  return /^[A-Za-z0-9+/]*={0,2}$/.test(s) && s.length % 4 === 0;
}

export function acceptsGzip(header: string): boolean {
  let gzip: number | undefined;
  let star: number | undefined;
  for (const part of header.split(",")) {
    const [name, ...params] = part.trim().split(";");
    const coding = (name ?? "").trim().toLowerCase();
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p);
      if (m) q = Number(m[1]);
    }
    if (coding === "gzip" || coding === "x-gzip") gzip = q;
    else if (coding === "*") star = q;
  }
  return (gzip ?? star ?? 0) > 0;
}

export function send(req: http.IncomingMessage, res: http.ServerResponse, status: number, body: unknown): void {
  let data = Buffer.from(JSON.stringify(body), "utf8");
  const headers: Record<string, string | number> = { "content-type": "application/json", "cache-control": "no-store", "x-content-type-options": "nosniff" };
  // Changed after integration: "Responses are gzip-compressed when accepted" (document 3 part 2) holds for
  // every reply, small ones too; and gzip is accepted when Accept-Encoding lists it (any case) or * with a
  // nonzero weight (RFC 9110 12.5.3), not when it says gzip;q=0.
  if (acceptsGzip(String(req.headers["accept-encoding"] ?? ""))) {
    data = zlib.gzipSync(data);
    headers["content-encoding"] = "gzip";
  }
  headers["content-length"] = data.length;
  res.writeHead(status, headers);
  res.end(data);
}
