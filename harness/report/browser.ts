// Opening a report the way a person does: Debian's headless Chromium driven over the DevTools protocol
// (a WebSocket, the `ws` package), so a test can see what the command line's --screenshot cannot: console
// errors, uncaught exceptions, CSP violations and every network request the page makes.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { HarnessError } from '../errors.ts';

/** Where Debian's package puts it; undefined when it is not installed. */
export function chromiumPath(): string | undefined {
  return ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
}

export interface PageVisit {
  /** console.error/assert calls, uncaught exceptions and error log entries (CSP violations among them). */
  errors: string[];
  /** Every request the page made other than its own document. */
  requests: string[];
  /** From navigation to the load event, ms. */
  loadMs: number;
  /**
   * The renderer main thread's busy time up to the screenshot, ms (DevTools Performance.getMetrics
   * TaskDuration, with its script, layout and style parts): what the page costs, apart from how long a
   * loaded machine made it wait.
   */
  mainThreadMs: { task: number; script: number; layout: number; style: number };
  screenshot: Buffer;
  /** Results of the expressions asked for, evaluated in the page after load (a promise is awaited). */
  values: Record<string, unknown>;
  /** Every response the page received (preflights included): method, URL and HTTP status. */
  responses: { method: string; url: string; status: number }[];
}

export interface VisitOptions {
  /** Further Chromium flags (for example --host-resolver-rules to point a name at 127.0.0.1). */
  chromiumArgs?: readonly string[];
}

/** Open `url` at width x height, wait for load, evaluate `expressions`, take a screenshot of the first screen. */
export async function visit(url: string, expressions: Record<string, string>, size = { width: 1280, height: 800 }, options: VisitOptions = {}): Promise<PageVisit> {
  return (await visits([{ url, expressions }], size, options))[0]!;
}

/**
 * Several pages, one after the other, each in a fresh tab of one Chromium (one start instead of one per
 * page: starting Chromium is most of a visit's time). The flags hold for every page.
 */
export async function visits(pages: readonly { url: string; expressions: Record<string, string> }[], size = { width: 1280, height: 800 }, options: VisitOptions = {}): Promise<PageVisit[]> {
  const bin = chromiumPath();
  if (!bin) throw new HarnessError('HIL_ERR_TOOL_FAILED', 'chromium is not installed');
  const profile = mkdtempSync(join(tmpdir(), 'hil-chromium-'));
  const child = spawn(bin, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-extensions', '--remote-debugging-port=0', `--user-data-dir=${profile}`, ...(options.chromiumArgs ?? []), 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  try {
    const wsUrl = await devtoolsUrl(child);
    const cdp = await Cdp.open(wsUrl);
    try {
      const out: PageVisit[] = [];
      for (const page of pages) out.push(await openPage(cdp, page.url, page.expressions, size));
      return out;
    } finally {
      cdp.close();
    }
  } finally {
    // Chromium's own helper processes (zygote, renderer, GPU) outlive its main process and keep writing
    // into the profile for a moment: the whole process group goes (spawned detached: its own group), and
    // the profile's removal retries while they let go of it.
    const exited = new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
    await exited;
    rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  }
}

/** One page in a new tab: load, evaluate, screenshot. */
async function openPage(cdp: Cdp, url: string, expressions: Record<string, string>, size: { width: number; height: number }): Promise<PageVisit> {
  const { targetId } = (await cdp.send('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
  const { sessionId } = (await cdp.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
  const s = (method: string, params: Record<string, unknown> = {}) => cdp.send(method, params, sessionId);
  const errors: string[] = [];
  const requests: string[] = [];
  const methods = new Map<string, string>();
  const responses: PageVisit['responses'] = [];
  cdp.on(sessionId, (method, p) => {
    if (method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert')) errors.push(`console.${String(p.type)}: ${JSON.stringify(p.args)}`);
    if (method === 'Runtime.exceptionThrown') errors.push(`exception: ${JSON.stringify((p.exceptionDetails as { text?: string })?.text ?? p)}`);
    if (method === 'Log.entryAdded') {
      const e = p.entry as { level: string; text: string; url?: string };
      if (e.level === 'error') errors.push(`log: ${e.text}${e.url ? ` (${e.url})` : ''}`);
    }
    if (method === 'Network.responseReceived') {
      const r = p.response as { url: string; status: number };
      responses.push({ method: methods.get(String(p.requestId)) ?? '', url: r.url, status: r.status });
    }
    if (method === 'Network.requestWillBeSent') {
      methods.set(String(p.requestId), (p.request as { method: string }).method);
      const r = (p.request as { url: string }).url;
      if (r !== url && !r.startsWith('data:')) requests.push(r);
    }
  });
  await s('Page.enable');
  await s('Runtime.enable');
  await s('Log.enable');
  await s('Network.enable');
  await s('Performance.enable');
  await s('Emulation.setDeviceMetricsOverride', { width: size.width, height: size.height, deviceScaleFactor: 1, mobile: false });
  const loaded = cdp.once(sessionId, 'Page.loadEventFired');
  const started = performance.now();
  await s('Page.navigate', { url });
  await loaded;
  const loadMs = performance.now() - started;
  const values: Record<string, unknown> = {};
  for (const [k, expr] of Object.entries(expressions)) {
    const r = (await s('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true })) as { result: { value?: unknown }; exceptionDetails?: unknown };
    if (r.exceptionDetails) throw new HarnessError('HIL_ERR_TOOL_FAILED', `evaluating ${k}: ${JSON.stringify(r.exceptionDetails)}`);
    values[k] = r.result.value;
  }
  const shot = (await s('Page.captureScreenshot', { format: 'png' })) as { data: string };
  const { metrics } = (await s('Performance.getMetrics')) as { metrics: { name: string; value: number }[] };
  const ms = (name: string) => Math.round((metrics.find((m) => m.name === name)?.value ?? NaN) * 1000);
  const mainThreadMs = { task: ms('TaskDuration'), script: ms('ScriptDuration'), layout: ms('LayoutDuration'), style: ms('RecalcStyleDuration') };
  // The tab goes, so that nothing of this page runs on while the next one loads.
  await cdp.send('Target.closeTarget', { targetId }).catch(() => undefined);
  return { errors, requests, loadMs, mainThreadMs, screenshot: Buffer.from(shot.data, 'base64'), values, responses };
}

function devtoolsUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new HarnessError('HIL_ERR_TOOL_FAILED', `chromium did not start its DevTools endpoint within 60 s: ${text.slice(-500)}`)), 60_000);
    child.stderr!.on('data', (b: Buffer) => {
      text += b.toString('utf8');
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(text);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new HarnessError('HIL_ERR_TOOL_FAILED', `chromium exited (${code}) before its DevTools endpoint: ${text.slice(-500)}`));
    });
  });
}

type Listener = (method: string, params: Record<string, unknown>) => void;

/** A minimal DevTools protocol client: commands with ids, events per session. */
class Cdp {
  private next = 1;
  private pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private listeners = new Map<string, Listener[]>();

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: Record<string, unknown>; sessionId?: string };
      if (m.id !== undefined) {
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        if (m.error) p?.reject(new HarnessError('HIL_ERR_TOOL_FAILED', `chromium: ${m.error.message}`));
        else p?.resolve(m.result);
      } else if (m.method) for (const l of this.listeners.get(m.sessionId ?? '') ?? []) l(m.method, m.params ?? {});
    });
  }

  static open(url: string): Promise<Cdp> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
      ws.once('open', () => resolve(new Cdp(ws)));
      ws.once('error', reject);
    });
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<unknown> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  }

  on(sessionId: string, l: Listener): void {
    this.listeners.set(sessionId, [...(this.listeners.get(sessionId) ?? []), l]);
  }

  once(sessionId: string, method: string): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      const l: Listener = (m, p) => {
        if (m !== method) return;
        this.listeners.set(sessionId, (this.listeners.get(sessionId) ?? []).filter((x) => x !== l));
        resolve(p);
      };
      this.on(sessionId, l);
    });
  }

  close(): void {
    this.ws.close();
  }
}

/**
 * Print a page to PDF with headless Chromium's --print-to-pdf (what a reviewer's "print to PDF" gives, the
 * print stylesheet applied) and return the PDF's bytes. Chromium runs in its own process group with a
 * throwaway profile, both removed afterwards.
 */
export async function printToPdf(url: string, timeoutMs = 150_000): Promise<Buffer> {
  const bin = chromiumPath();
  if (!bin) throw new HarnessError('HIL_ERR_TOOL_FAILED', 'chromium is not installed');
  const profile = mkdtempSync(join(tmpdir(), 'hil-chromium-'));
  const out = join(profile, 'page.pdf');
  const child = spawn(bin, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-extensions', `--user-data-dir=${profile}`, '--no-pdf-header-footer', `--print-to-pdf=${out}`, url], { stdio: 'ignore', detached: true });
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => reject(new HarnessError('HIL_ERR_TOOL_FAILED', `chromium --print-to-pdf did not finish within ${timeoutMs} ms`)), timeoutMs);
      child.once('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    if (!existsSync(out)) throw new HarnessError('HIL_ERR_TOOL_FAILED', `chromium --print-to-pdf exited (${code}) without writing a PDF`);
    return readFileSync(out);
  } finally {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone with its group
    }
    rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  }
}

/** Pages of a PDF: its page objects (/Type /Page, not the /Pages tree nodes). */
export function pdfPageCount(pdf: Buffer): number {
  return (pdf.toString('latin1').match(/\/Type\s*\/Page(?![a-zA-Z])/g) ?? []).length;
}
