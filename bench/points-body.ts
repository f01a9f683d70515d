// A large prepare_trajectory request body for the benchmarks: document 1 part 2 Request with `points`
// (time_ns, nine positions, nine velocities as float64 text), deterministic, about `targetBytes` long.

export interface PointsBody {
  bytes: Buffer;
  points: number;
}

export function makePointsBody(targetBytes = 50_000_000, axes = 9): PointsBody {
  const head =
    '{"schema":"svc.rt-control.request.v1","operation":"prepare_trajectory","session":"' +
    '5e'.repeat(32) +
    '","generation":1,"axis_mask":' +
    ((1 << axes) - 1) +
    ',"points":[';
  const parts: string[] = [head];
  let length = head.length;
  let n = 0;
  const pos = new Array<number>(axes);
  const vel = new Array<number>(axes);
  // At most 250000 points (document 1 part 8).
  for (; length < targetBytes - 2 && n < 250_000; n++) {
    for (let a = 0; a < axes; a++) {
      pos[a] = Math.sin(n * 1e-4 + a) * 1.2345678901234567;
      vel[a] = Math.cos(n * 1e-4 + a) * 0.12345678901234567;
    }
    const s = `${n ? ',' : ''}{"time_ns":${n * 1_000_000},"position":[${pos.join(',')}],"velocity":[${vel.join(',')}]}`;
    parts.push(s);
    length += s.length;
  }
  parts.push(']}');
  return { bytes: Buffer.from(parts.join(''), 'latin1'), points: n };
}
