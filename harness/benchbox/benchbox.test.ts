// The bench box client against @serialport/binding-mock: every message (the exact bytes on the wire and what
// the client makes of the reply), refusals, malformed lines, a silent box, a box that reboots, and the
// heartbeat watchdog of the simulated box.

import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { BenchBoxClient, BenchBoxError, mockBinding, type MockPortBinding } from './client.ts';
import { decodeStatus, formatRequest, LineError, parseReply, parseRequest } from './protocol.ts';
import { BenchBoxModel, serveOnMockPort, type ServedBox } from './simbox.ts';

const PATH = '/dev/ttyBENCH0';
let clients: BenchBoxClient[] = [];
let served: ServedBox[] = [];

const MockBinding = await mockBinding();
beforeEach(() => {
  MockBinding.reset();
  MockBinding.createPort(PATH, { echo: false, record: true });
});
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  for (const s of served.splice(0)) s.stop();
  MockBinding.reset();
});

/** A client on the mock port with the simulated box answering. */
async function withBox(opts: { outputs?: () => number; timeoutMs?: number } = {}) {
  const cell: Array<{ chainClosed: boolean; powerOn: boolean }> = [];
  const model = new BenchBoxModel(performance.now(), { cell: (s) => void cell.push(s), outputs: opts.outputs });
  if (opts.timeoutMs) model.timeoutMs = opts.timeoutMs;
  let box!: ServedBox;
  const client = await BenchBoxClient.open({ path: PATH, mock: true, replyTimeoutMs: 300, attach: (p) => (box = serveOnMockPort(p as MockPortBinding, model)) });
  clients.push(client);
  served.push(box);
  const port = client.bindingPort as MockPortBinding;
  const wire = () => port.recording.toString('latin1');
  return { client, model, box, cell, wire };
}

/** A client on the mock port with a scripted box: `answer` maps each request line to raw reply bytes. */
async function withScript(answer: (line: string) => string | null, replyTimeoutMs = 150) {
  const client = await BenchBoxClient.open({
    path: PATH,
    mock: true,
    replyTimeoutMs,
    attach: (p) => {
      const port = p as MockPortBinding;
      const original = port.write.bind(port);
      port.write = async (b: Buffer) => {
        await original(b);
        for (const line of b.toString('latin1').split('\n').filter(Boolean)) {
          const out = line.endsWith(' HELLO') ? `${line.split(' ')[0]} OK proto=1 fw=script timeout_ms=500\n` : answer(line);
          if (out !== null) setImmediate(() => port.emitData(out));
        }
      };
    },
  });
  clients.push(client);
  return client;
}

describe('protocol lines', () => {
  test('requests are formatted exactly; ids 1..65535; values as 0x-prefixed 16-bit hex', () => {
    expect(formatRequest(1, { verb: 'HELLO' })).toBe('1 HELLO\n');
    expect(formatRequest(65535, { verb: 'RELAY', state: 'CLOSE' })).toBe('65535 RELAY CLOSE\n');
    expect(formatRequest(7, { verb: 'INPUTS', mask: 0x00ff, value: 0x0a0b })).toBe('7 INPUTS 0x00ff 0x0a0b\n');
    expect(formatRequest(8, { verb: 'TIMEOUT', ms: 250 })).toBe('8 TIMEOUT 250\n');
    expect(() => formatRequest(0, { verb: 'HB' })).toThrow(RangeError);
    expect(() => formatRequest(65536, { verb: 'HB' })).toThrow(RangeError);
    expect(() => formatRequest(1, { verb: 'INPUTS', mask: 0x10000, value: 0 })).toThrow(RangeError);
  });

  test('reply and event lines parse; anything else is a LineError with its code', () => {
    expect(parseReply('12 OK relay=closed chain=closed')).toEqual({ kind: 'ok', id: 12, fields: { relay: 'closed', chain: 'closed' } });
    expect(parseReply('3 ERR hb_not_armed send HB first\r')).toEqual({ kind: 'err', id: 3, code: 'hb_not_armed', text: 'send HB first' });
    expect(parseReply('* BOOT proto=1 fw=x timeout_ms=500')).toEqual({ kind: 'event', event: 'BOOT', fields: { proto: '1', fw: 'x', timeout_ms: '500' } });
    const bad: Array<[string, LineError['code']]> = [
      ['', 'empty'],
      ['x'.repeat(129), 'line_too_long'],
      ['1 OK a=\u00e9', 'not_ascii'],
      ['0 OK', 'bad_id'],
      ['65536 OK', 'bad_id'],
      ['01 OK', 'bad_id'],
      ['1 MAYBE', 'bad_status'],
      ['1 OK relay', 'bad_field'],
      ['1 OK a=1 a=2', 'bad_field'],
      ['1  OK', 'bad_field'],
      ['1 ERR', 'bad_status'],
      ['* boot', 'bad_status'],
    ];
    for (const [line, code] of bad) expect(() => parseReply(line), line).toThrow(expect.objectContaining({ code }));
    expect(parseReply('x'.repeat(0) + '1 OK ' + 'a='.padEnd(64, 'b'))).toMatchObject({ kind: 'ok' });
  });

  test('the box side: requests, refusals by code, and lines without an id left unanswered', () => {
    expect(parseRequest('4 INPUTS 0x0001 0x0001')).toEqual({ id: 4, req: { verb: 'INPUTS', mask: 1, value: 1 } });
    expect(parseRequest('4 INPUTS 0x1 0x0001')).toMatchObject({ id: 4, code: 'bad_argument' });
    expect(parseRequest('5 TIMEOUT 99')).toMatchObject({ id: 5, code: 'bad_argument' });
    expect(parseRequest('5 TIMEOUT 100')).toEqual({ id: 5, req: { verb: 'TIMEOUT', ms: 100 } });
    expect(parseRequest('5 TIMEOUT 10001')).toMatchObject({ code: 'bad_argument' });
    expect(parseRequest('6 JUMP')).toMatchObject({ id: 6, code: 'bad_command' });
    expect(parseRequest('6 HB now')).toMatchObject({ id: 6, code: 'bad_argument' });
    expect(parseRequest(`7 HB ${'x'.repeat(130)}`)).toMatchObject({ id: 7, code: 'line_too_long' });
    expect(parseRequest('HELLO')).toBeNull();
    expect(decodeStatus({ chain: 'closed' })).toEqual({ bad: 'relay' });
  });
});

describe('every message against the simulated box on the mock port', () => {
  test('HELLO at open, STATUS decoded, the exact bytes on the wire', async () => {
    const { client, wire } = await withBox({ outputs: () => 0x0005 });
    const st = await client.status();
    expect(st).toEqual({ chain: 'open', relay: 'open', power: 'off', heartbeat: 'idle', timeoutMs: 500, outputs: 0x0005, inputs: 0, uptimeMs: expect.any(Number) });
    expect(wire()).toBe('1 HELLO\n2 STATUS\n');
  });

  test('HB arms the watchdog, RELAY CLOSE closes the chain, POWER RESTORE powers the drives; the cell sees each change', async () => {
    const { client, cell, wire } = await withBox();
    expect(await client.heartbeat()).toEqual({ hb: 'armed', remaining_ms: '500' });
    expect(await client.relay('CLOSE')).toEqual({ relay: 'closed', chain: 'closed' });
    expect(await client.power('RESTORE')).toEqual({ power: 'on' });
    expect((await client.status())).toMatchObject({ chain: 'closed', relay: 'closed', power: 'on', heartbeat: 'armed' });
    expect(await client.power('CUT')).toEqual({ power: 'off' });
    expect(await client.relay('OPEN')).toEqual({ relay: 'open', chain: 'open' });
    expect(cell).toEqual([
      { chainClosed: true, powerOn: false },
      { chainClosed: true, powerOn: true },
      { chainClosed: true, powerOn: false },
      { chainClosed: false, powerOn: false },
    ]);
    expect(wire()).toBe('1 HELLO\n2 HB\n3 RELAY CLOSE\n4 POWER RESTORE\n5 STATUS\n6 POWER CUT\n7 RELAY OPEN\n');
  });

  test('OUTPUTS reads back the cell outputs; INPUTS sets the masked bits only; TIMEOUT sets the watchdog', async () => {
    let out = 0x8001;
    const { client, model, wire } = await withBox({ outputs: () => out });
    expect(await client.outputs()).toBe(0x8001);
    out = 0x0002;
    expect(await client.outputs()).toBe(0x0002);
    expect(await client.setInputs(0x00ff, 0xffff)).toBe(0x00ff);
    expect(await client.setInputs(0x0f00, 0x0100)).toBe(0x01ff);
    expect(await client.setInputs(0x0001, 0x0000)).toBe(0x01fe);
    expect(await client.setTimeoutMs(250)).toEqual({ timeout_ms: '250' });
    expect(model.timeoutMs).toBe(250);
    expect(wire()).toBe('1 HELLO\n2 OUTPUTS\n3 OUTPUTS\n4 INPUTS 0x00ff 0xffff\n5 INPUTS 0x0f00 0x0100\n6 INPUTS 0x0001 0x0000\n7 TIMEOUT 250\n');
  });

  test('refusals carry the box code: no relay without a heartbeat, no power with the chain open', async () => {
    const { client, model } = await withBox();
    await expect(client.relay('CLOSE')).rejects.toMatchObject({ code: 'BENCH_REFUSED', detail: { box_code: 'hb_not_armed' } });
    await expect(client.power('RESTORE')).rejects.toMatchObject({ code: 'BENCH_REFUSED', detail: { box_code: 'power_with_chain_open' } });
    await client.heartbeat();
    await client.relay('CLOSE');
    model.buttonsClosed = false; // someone pressed an E-stop button: the chain is open whatever the relay
    await expect(client.power('RESTORE')).rejects.toMatchObject({ code: 'BENCH_REFUSED', detail: { box_code: 'power_with_chain_open' } });
    expect((await client.status()).chain).toBe('open');
    await expect(client.setTimeoutMs(50)).rejects.toMatchObject({ code: 'BENCH_REFUSED', detail: { box_code: 'bad_argument' } });
  });

  test('the heartbeat keeps the chain closed; a host that goes silent gets the chain opened within the box timeout', async () => {
    const { client, model, cell } = await withBox({ timeoutMs: 200 });
    await client.heartbeat();
    await client.relay('CLOSE');
    await client.power('RESTORE');
    client.startHeartbeat(50);
    await new Promise((r) => setTimeout(r, 500));
    expect(model.chain).toBe('closed');
    expect(client.events).toEqual([]);
    client.stopHeartbeat();
    const stoppedAt = performance.now();
    while (!client.events.some((e) => e.event === 'ESTOP') && performance.now() - stoppedAt < 2000) await new Promise((r) => setTimeout(r, 10));
    const ev = client.events.find((e) => e.event === 'ESTOP')!;
    expect(ev.fields).toEqual({ chain: 'open', reason: 'heartbeat_timeout', relay: 'opened' });
    expect(model.chain).toBe('open');
    expect(model.power).toBe('off');
    expect(cell.at(-1)).toEqual({ chainClosed: false, powerOn: false });
    expect(await client.status()).toMatchObject({ heartbeat: 'expired', relay: 'open', power: 'off' });
    // a new heartbeat re-arms the watchdog, but the relay stays open until the host closes it again
    await client.heartbeat();
    expect(await client.status()).toMatchObject({ heartbeat: 'armed', relay: 'open' });
  });
});

describe('a box that misbehaves', () => {
  test('a reply that is not protocol fails the request with BENCH_MALFORMED and is kept for the report', async () => {
    const client = await withScript((line) => (line.endsWith('STATUS') ? `${line.split(' ')[0]} MAYBE\n` : null));
    await expect(client.status()).rejects.toMatchObject({ code: 'BENCH_MALFORMED', detail: { why: 'bad_status' } });
    expect(client.malformed).toEqual([{ line: '2 MAYBE', why: 'status "MAYBE" (OK or ERR)' }]);
  });

  test('a reply to another request id, an overlong line, a STATUS with a field missing: BENCH_MALFORMED each', async () => {
    let k = 0;
    const client = await withScript((line) => {
      const id = line.split(' ')[0];
      k++;
      if (k === 1) return `${Number(id) + 5} OK\n`;
      if (k === 2) return `${id} OK x=${'y'.repeat(60)} z=${'y'.repeat(60)}\n`;
      return `${id} OK chain=closed relay=closed power=on hb=armed timeout_ms=500 outputs=0x0000 uptime_ms=5\n`;
    });
    await expect(client.heartbeat()).rejects.toMatchObject({ code: 'BENCH_MALFORMED', message: expect.stringContaining('answered request 7 while 2 was outstanding') });
    await expect(client.heartbeat()).rejects.toMatchObject({ code: 'BENCH_MALFORMED', detail: { why: 'line_too_long' } });
    await expect(client.status()).rejects.toMatchObject({ code: 'BENCH_MALFORMED', message: 'the bench box STATUS reply has no valid inputs' });
  });

  test('a silent box: BENCH_TIMEOUT after the reply timeout, and the next request is not confused by a late reply', async () => {
    let silent = true;
    const late: string[] = [];
    const client = await withScript((line) => {
      const id = line.split(' ')[0];
      if (silent) {
        late.push(`${id} OK hb=armed remaining_ms=500\n`);
        return null;
      }
      return `${late.shift() ?? ''}${id} OK hb=armed remaining_ms=500\n`;
    }, 100);
    const t0 = performance.now();
    await expect(client.heartbeat()).rejects.toMatchObject({ code: 'BENCH_TIMEOUT', detail: { verb: 'HB' } });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(95);
    silent = false;
    // the late reply to request 2 arrives first: it answers no outstanding request... it does name another id
    await expect(client.heartbeat()).rejects.toMatchObject({ code: 'BENCH_MALFORMED' });
    expect(await client.heartbeat()).toEqual({ hb: 'armed', remaining_ms: '500' });
  });

  test('a box that reboots: the outstanding request fails with BENCH_REBOOTED, the client knows, the box is back in its safe state', async () => {
    const { client, box } = await withBox();
    await client.heartbeat();
    await client.relay('CLOSE');
    box.silent = true;
    const pending = client.status();
    await new Promise((r) => setTimeout(r, 20));
    box.silent = false;
    box.reboot();
    await expect(pending).rejects.toMatchObject({ code: 'BENCH_REBOOTED' });
    expect(client.rebooted).toBe(true);
    expect(client.events.map((e) => [e.event, e.fields])).toEqual([['BOOT', { proto: '1', fw: 'sim-1.0', timeout_ms: '500' }]]);
    expect(await client.status()).toMatchObject({ chain: 'open', relay: 'open', power: 'off', heartbeat: 'idle' });
  });

  test('a box that speaks another protocol version is refused at open; a port that does not exist is BENCH_PORT', async () => {
    const bad = BenchBoxClient.open({
      path: PATH,
      mock: true,
      attach: (p) => {
        const port = p as MockPortBinding;
        const original = port.write.bind(port);
        port.write = async (b: Buffer) => {
          await original(b);
          setImmediate(() => port.emitData('1 OK proto=2 fw=new timeout_ms=500\n'));
        };
      },
    });
    await expect(bad).rejects.toSatisfy((e: unknown) => e instanceof BenchBoxError && e.code === 'BENCH_PROTOCOL');
    await expect(BenchBoxClient.open({ path: '/dev/ttyNOPE', mock: true })).rejects.toMatchObject({ code: 'BENCH_PORT' });
  });
});
