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
