// The external target: someone else's control service at a socket path. No private channel: fault
// injection and restarts are unavailable, and tests that need them skip with that reason.

import { access } from 'node:fs/promises';
import { ControlClient } from '../clients/control.ts';
import { TargetError, type Target, type TargetDescriptor, type TargetOptions } from './types.ts';

class ExternalTarget implements Target {
  readonly name = 'external' as const;
  readonly driver = 'unknown';
  readonly abilities;
  private clients: ControlClient[] = [];

  constructor(
    readonly address: string,
    allowMotion: boolean,
  ) {
    this.abilities = { faultInjection: false, coreRestart: false, serviceRestart: false, motion: allowMotion };
  }

  client(): ControlClient {
    const c = new ControlClient(this.address);
    this.clients.push(c);
    return c;
  }

  inject(): Promise<void> {
    return Promise.reject(new TargetError('target_no_ability', 'the external target has no fault injection channel'));
  }

  restartService(): Promise<void> {
    return Promise.reject(new TargetError('target_no_ability', 'the external target cannot restart its service'));
  }

  restartCore(): Promise<void> {
    return Promise.reject(new TargetError('target_no_ability', 'the external target cannot restart its core'));
  }

  diagnostics(): string {
    return '';
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.close()));
  }
}

export const externalTarget: TargetDescriptor = {
  name: 'external',
  summary: "someone else's control service reached at a Unix socket path",
  options: { HIL_SOCKET: 'control socket path (required)', HIL_ALLOW_MOTION: '1 to allow tests that energise drives' },
  async open(o: TargetOptions): Promise<Target> {
    if (!o.socket) throw new TargetError('target_option_missing', 'the external target needs --socket PATH (HIL_SOCKET)');
    try {
      await access(o.socket);
    } catch {
      throw new TargetError('target_start_failed', `no control socket at ${o.socket}`);
    }
    return new ExternalTarget(o.socket, o.allowMotion ?? false);
  },
};
