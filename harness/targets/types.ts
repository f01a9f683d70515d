// How a run reaches a system. Each target kind is one module exporting a declarative descriptor
// (the wptrunner habit): its name, what it can do, the options it reads, and `open`.

import type { ControlClient } from '../clients/control.ts';
import type { VariantOptions } from './variant.ts';

export type { VariantOptions } from './variant.ts';

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
  /** The socket directory's public/control.sock when the target has one (reference stack layout). */
  readonly publicAddress: string | undefined;
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
  /**
   * Why this target cannot provide a variant with these options (a skip reason), or undefined when it can.
   * Suites use the `variant` fixture, which validates the options, skips with this reason and closes the
   * variant at the end of the test.
   */
  cannotProvide(options: VariantOptions): string | undefined;
  /**
   * A separately started system with these options (harness/targets/variant.ts), which the caller closes.
   * Rejects with HIL_ERR_VARIANT_INVALID for malformed options and HIL_ERR_VARIANT_UNSUPPORTED when
   * cannotProvide gives a reason.
   */
  variant(options: VariantOptions): Promise<Target>;
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
  /** Why this kind of target cannot provide the variant (a skip reason), or undefined. */
  cannotProvide(variant: VariantOptions): string | undefined;
  /** Start a variant without opening the file's target first (validated options). */
  openVariant(variant: VariantOptions, options: TargetOptions): Promise<Target>;
}
