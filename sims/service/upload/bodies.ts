// Request bodies for the upload tests and benchmarks (document 1 part 2 Request and Point).

export const SCHEMA = 'svc.rt-control.request.v1';
export const SESSION = '5e'.repeat(32);

export interface PointSpec {
  time_ns: bigint | number;
  position: number[];
  velocity?: number[];
  io_mask?: number;
  io_values?: number;
}

/** The envelope text of a prepare_trajectory body, without the closing brace and without points. */
export function envelopeText(extra = ''): string {
  return `{"schema":"${SCHEMA}","operation":"prepare_trajectory","session":"${SESSION}","generation":7,"axis_mask":511${extra}`;
}

export function pointText(p: PointSpec): string {
  let s = `{"time_ns":${p.time_ns},"position":[${p.position.map(num).join(',')}]`;
  if (p.velocity) s += `,"velocity":[${p.velocity.map(num).join(',')}]`;
  if (p.io_mask !== undefined) s += `,"io_mask":${p.io_mask}`;
  if (p.io_values !== undefined) s += `,"io_values":${p.io_values}`;
  return s + '}';
}

/** JSON text of a finite number as JSON.stringify writes it (keeps -0 as "-0" so it survives). */
function num(x: number): string {
  return Object.is(x, -0) ? '-0' : JSON.stringify(x);
}

export function bodyText(points: PointSpec[], extra = ''): string {
  return `${envelopeText(extra)},"points":[${points.map(pointText).join(',')}]}`;
}

export const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Deterministic point n of a nine-axis trajectory with full-precision positions and velocities. */
export function samplePoint(n: number, axes = 9): PointSpec {
  const position: number[] = [];
  const velocity: number[] = [];
  for (let a = 0; a < axes; a++) {
    position.push(Math.sin(n * 1e-4 + a) * 1.2345678901234567);
    velocity.push(Math.cos(n * 1e-4 + a) * 0.12345678901234567);
  }
  return { time_ns: n * 1_000_000, position, velocity };
}

/** A body of `count` sample points, built in pieces (no giant intermediate arrays of strings). */
export function sampleBody(count: number, axes = 9): Buffer {
  const parts: Buffer[] = [Buffer.from(envelopeText() + ',"points":[', 'latin1')];
  let batch: string[] = [];
  for (let n = 0; n < count; n++) {
    batch.push((n ? ',' : '') + pointText(samplePoint(n, axes)));
    if (batch.length === 1000) {
      parts.push(Buffer.from(batch.join(''), 'latin1'));
      batch = [];
    }
  }
  parts.push(Buffer.from(batch.join('') + ']}', 'latin1'));
  return Buffer.concat(parts);
}
