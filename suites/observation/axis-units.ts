// What the units tests read of a Describe axis (document 1 part 1 "Transports", units: a position unit of
// rad or m, and the drive-count scale), shared by units.test.ts and units-move.test.ts.

export interface AxisUnits {
  id: string;
  position_unit: string;
  counts_per_unit: number;
  sign: number | bigint;
}
