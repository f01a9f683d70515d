// The suite's own forward kinematics of a URDF robot description (independent of the server's: the
// tool pose a Cartesian test checks is computed here from the joint positions the control service
// reports). Chain from the root link to `tool0`; R = Rz(yaw) Ry(pitch) Rx(roll) as URDF writes origins.

type M = number[][];

const mat = (r: number, p: number, y: number, t: number[]): M => {
  const [cr, sr, cp, sp, cy, sy] = [Math.cos(r), Math.sin(r), Math.cos(p), Math.sin(p), Math.cos(y), Math.sin(y)];
  return [
    [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr, t[0]!],
    [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr, t[1]!],
    [-sp, cp * sr, cp * cr, t[2]!],
    [0, 0, 0, 1],
  ];
};
const mm = (a: M, b: M): M => a.map((row) => [0, 1, 2, 3].map((j) => row.reduce((s, v, k) => s + v * b[k]![j]!, 0)));

/** Rotation by angle q about a unit axis (Rodrigues). */
function rot(axis: number[], q: number): M {
  const [x, y, z] = axis as [number, number, number];
  const c = Math.cos(q);
  const s = Math.sin(q);
  const t = 1 - c;
  return [
    [t * x * x + c, t * x * y - s * z, t * x * z + s * y, 0],
    [t * x * y + s * z, t * y * y + c, t * y * z - s * x, 0],
    [t * x * z - s * y, t * y * z + s * x, t * z * z + c, 0],
    [0, 0, 0, 1],
  ];
}

export interface ToolPose {
  xyz: number[];
  /** Rotation matrix rows. */
  R: number[][];
}

/** Forward kinematics to `tip` for joint positions by joint name (joints not given are 0). */
export function toolPose(urdf: string, q: Record<string, number>, tip = 'tool0'): ToolPose {
  const joints = [...urdf.matchAll(/<joint\b[^>]*name="([^"]+)"[^>]*type="([^"]+)"[^>]*>([\s\S]*?)<\/joint>/g)].map((m) => {
    const body = m[3]!;
    const attr = (el: string, a: string) => new RegExp(`<${el}\\b[^>]*\\b${a}="([^"]*)"`).exec(body)?.[1];
    const v = (s: string | undefined, d: number[]) => (s ? s.trim().split(/\s+/).map(Number) : d);
    return { name: m[1]!, type: m[2]!, parent: attr('parent', 'link')!, child: attr('child', 'link')!, xyz: v(attr('origin', 'xyz'), [0, 0, 0]), rpy: v(attr('origin', 'rpy'), [0, 0, 0]), axis: v(attr('axis', 'xyz'), [1, 0, 0]) };
  });
  const chain = [];
  for (let link = tip, j = joints.find((x) => x.child === link); j; link = j.parent, j = joints.find((x) => x.child === link)) chain.unshift(j);
  let T = mat(0, 0, 0, [0, 0, 0]);
  for (const j of chain) {
    T = mm(T, mat(j.rpy[0]!, j.rpy[1]!, j.rpy[2]!, j.xyz));
    if (j.type === 'revolute' || j.type === 'continuous') T = mm(T, rot(j.axis, q[j.name] ?? 0));
  }
  return { xyz: [T[0]![3]!, T[1]![3]!, T[2]![3]!], R: T.slice(0, 3).map((r) => r.slice(0, 3)) };
}

/** R from roll, pitch, yaw. */
export function rpyRotation(r: number, p: number, y: number): number[][] {
  return mat(r, p, y, [0, 0, 0]).slice(0, 3).map((row) => row.slice(0, 3));
}

/** Angle of the rotation between two rotation matrices (radians). */
export function rotationAngle(a: number[][], b: number[][]): number {
  let tr = 0;
  for (let i = 0; i < 3; i++) for (let k = 0; k < 3; k++) tr += a[k]![i]! * b[k]![i]!;
  return Math.acos(Math.max(-1, Math.min(1, (tr - 1) / 2)));
}
