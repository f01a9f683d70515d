// The cells the planner stub can plan for ("missing cell meshes" otherwise, document 2 part 7). One cell:
// the simulator's nine-axis cell (fixtures/machines/nine-axis.json): position limits copied from its axes,
// velocity ceilings below its max_velocity (the same ceilings as the reference dense file), rest pose at
// zero on every axis (the simulated drives' Home position). A unit test holds this table to the machine file.

export interface PlannerCell {
  cellId: string;
  axisNames: readonly string[];
  min: readonly number[];
  max: readonly number[];
  /** Per-axis velocity ceiling written to limits.max_abs_qd_rad_s (rad/s). */
  ceiling: readonly number[];
  home: readonly number[];
  /** Which columns the robot commands (document 2: axis_mask, one bit per column). */
  axisMask: number;
}

export const CELLS: Readonly<Record<string, PlannerCell>> = {
  'sim-nine-axis': {
    cellId: 'sim-nine-axis',
    axisNames: ['J1', 'J2', 'J3', 'J4', 'J5', 'J6', 'J7', 'J8', 'J9'],
    min: [-2.9, -1.65, -1.2, -3.3, -2.2, -6.2, -1.6, -6.2, -3.1],
    max: [2.9, 2.35, 3.0, 3.3, 2.2, 6.2, 1.6, 6.2, 3.1],
    ceiling: [2, 2, 2, 4, 4, 5, 1, 1.5, 1],
    home: [0, 0, 0, 0, 0, 0, 0, 0, 0],
    axisMask: 0x1ff,
  },
};

/** Margin kept from every position limit when deciding whether a pose is reachable (rad). */
export const REACH_MARGIN = 0.05;

/**
 * The stub's stand-in kinematics (docs/profile.md "Weld planner stub: what it plans"): a workpiece point in
 * world metres maps linearly onto the arm joints; the positioner tables and the turn axis are held.
 */
export function jointsAt(w: readonly number[], home: readonly number[]): number[] {
  const [x, y, z] = w as [number, number, number];
  return [
    home[0]! + 0.8 * y,
    home[1]! + 0.6 * (x - 0.5),
    home[2]! - 0.5 * (z - 0.3),
    home[3]! + 0.2 * y,
    home[4]! + 0.4 * (z - 0.3),
    home[5]! - 0.3 * y,
    home[6]!,
    home[7]!,
    home[8]!,
  ];
}

/** The first axis outside the reachable range, or -1. */
export function unreachableAxis(cell: PlannerCell, q: readonly number[]): number {
  for (let j = 0; j < q.length; j++) if (!(q[j]! >= cell.min[j]! + REACH_MARGIN && q[j]! <= cell.max[j]! - REACH_MARGIN)) return j;
  return -1;
}
