// How a run reaches a system. Each target kind is one module exporting a declarative descriptor
// (the wptrunner habit): its name, what it can do, the options it reads, and `open`.

import type { ControlClient } from '../clients/control.ts';

export type TargetName = 'sim' | 'external';

/** What a target can do beyond the documented interface; suites skip with a stated reason otherwise. */
export interface TargetAbilities {
  /** Faults can be injected out of band (private test channel of the reference stack). */
  faultInjection: boolean;
  /** The core can be killed and restarted (daemon_restarted scenarios). */
  coreRestart: boolean;
  /** The service can be restarted (adapter incarnation scenarios). */
  serviceRestart: boolean;
  /** Tests that energise drives may run (sim always; a rig only with --allow-motion and a closed E-stop chain). */
  motion: boolean;
}

export interface TargetOptions {
  /** external: the control socket path. */
  socket?: string;
  /** sim: machine configuration file. */
  machine?: string;
  /** rig: motion explicitly allowed. */
  allowMotion?: boolean;
  /** sim: extra arguments for `hil serve`. */
  serveArgs?: string[];
}

export interface Target {
  readonly name: TargetName;
  readonly driver: string;
  /** Where the control service answers (socket path). */
  readonly address: string;
  readonly abilities: TargetAbilities;
  /** A fresh client on the control socket (closed by the target at close). */
  client(): ControlClient;
  /** Inject a fault through the private channel; throws when the target has none. */
  inject(fault: Record<string, unknown>): Promise<void>;
  restartCore(): Promise<void>;
  /**
   * Stepped clock only (`hil serve --clock stepped`): run `cycles` core cycles now and resolve with the
   * core's time after them. Absent on targets that cannot.
   */
  step?(cycles: number): Promise<bigint>;
  /** Restart the control service process (a new adapter incarnation); throws when the target cannot. */
  restartService(): Promise<void>;
  /** Lines the target process wrote to stderr (diagnostics for the report). */
  diagnostics(): string;
  close(): Promise<void>;
}

export interface TargetDescriptor {
  name: TargetName;
  summary: string;
  /** Environment variables / options the target reads. */
  options: Record<string, string>;
  open(options: TargetOptions): Promise<Target>;
}

export class TargetError extends Error {
  constructor(
    readonly code: 'target_start_failed' | 'target_option_missing' | 'target_unknown' | 'target_no_ability',
    message: string,
  ) {
    super(message);
  }
}
