// The CiA 402 table both sides read (drivers/ds402.ts): the controlword the core writes for each state
// decodes, on the drive's side, to the command that moves it one step toward what the core wants.

import { expect, test } from 'vitest';
import { controlwordFor, decodeControlword, Ds402State } from './ds402.ts';

test('toward enabled: shutdown, switch on, enable operation; away: quick stop from enabled, else disable voltage; a fault only disables', () => {
  const step = (s: Ds402State, want: boolean) => decodeControlword(controlwordFor(s, want), 0);
  expect(step(Ds402State.SwitchOnDisabled, true)).toBe('shutdown');
  expect(step(Ds402State.ReadyToSwitchOn, true)).toBe('switch_on');
  expect(step(Ds402State.SwitchedOn, true)).toBe('enable_operation');
  expect(step(Ds402State.OperationEnabled, true)).toBe('enable_operation');
  expect(step(Ds402State.OperationEnabled, false)).toBe('quick_stop');
  expect(step(Ds402State.SwitchedOn, false)).toBe('disable_voltage');
  expect(step(Ds402State.Fault, true)).toBe('disable_voltage');
  expect(step(Ds402State.Fault, false)).toBe('disable_voltage');
});

test('the simulated drives read every controlword bit through the shared table, never a literal mask', async () => {
  // KickCAT's habit (DESIGN.md): the drive and the master share one CiA 402 table, so a bit the core
  // raises (CW.homingStart for mode 6) is the bit the drive tests; a literal mask could drift from it.
  const { readFileSync } = await import('node:fs');
  const src = readFileSync(new URL('./sim/driver.ts', import.meta.url), 'utf8');
  const literalMasks = src.split('\n').filter((line) => /\bcw\s*&\s*(0x[0-9a-f]+|\d+)/i.test(line));
  expect(literalMasks).toEqual([]);
  expect(src).toContain('CW.homingStart');
});
