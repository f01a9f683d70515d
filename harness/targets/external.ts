// The external target: someone else's control service at a socket path. No private channel: fault
// injection and restarts are unavailable, and tests that need them skip with that reason.

import { existsSync, statSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { ControlClient } from '../clients/control.ts';
import { HarnessError } from '../errors.ts';
import { machineOf } from '../machine.ts';
import { olpFactsFromFile } from './olp-facts.ts';
import { SharedClients } from './shared.ts';
import { envValues, str } from './options.ts';
import type { PlannerEndpoint, RemoteListener, Target, TargetDescriptor, TargetOption } from './types.ts';
import { describeVariant, parseVariant, type VariantOptions } from './variant.ts';

class ExternalTarget implements Target {
  readonly name = 'external' as const;
  readonly driver = 'unknown';
  readonly abilities;
  readonly publicAddress = undefined;
  private readonly shared: SharedClients;

  constructor(
    readonly address: string,
    allowMotion: boolean,
    /** The service's processes on this host (--service-pid), the first its control service. */
    private readonly pids: readonly number[] = [],
  ) {
    this.abilities = { faultInjection: false, coreRestart: false, serviceRestart: false, motion: allowMotion, hostTimedRecords: true };
    this.shared = new SharedClients(() => new ControlClient(address));
  }

  /** The control service's process where the user named it on this host (the soak samples its memory). */
  get pid(): number | undefined {
    return this.pids[0];
  }

  /** Every process named, for the run-queue waits a timing judgment counts (harness/targets/live.ts). */
  get pidsOnHost(): readonly number[] {
    return this.pids;
  }

  client(): ControlClient {
    return this.shared.client();
  }

  /** After each test: end the grants the test's clients were given (harness/targets/shared.ts). */
  async settle(): Promise<void> {
    await this.shared.reconcile();
  }

  inject(): Promise<void> {
    return Promise.reject(new HarnessError('HIL_ERR_TARGET_NO_ABILITY', 'the external target has no fault injection channel'));
  }

  restartService(): Promise<void> {
    return Promise.reject(new HarnessError('HIL_ERR_TARGET_NO_ABILITY', 'the external target cannot restart its service'));
  }

  restartCore(): Promise<void> {
    return Promise.reject(new HarnessError('HIL_ERR_TARGET_NO_ABILITY', 'the external target cannot restart its core'));
  }

  cannotProvide(options: VariantOptions): string {
    return cannotProvide(options);
  }

  variant(options: VariantOptions): Promise<Target> {
    return unsupported(options);
  }

  diagnostics(): string {
    return '';
  }

  async close(): Promise<void> {
    await this.shared.reconcile();
    await this.shared.close();
  }
}

function cannotProvide(options: VariantOptions): string {
  return `target external cannot provide a stack with ${describeVariant(options)}: it reaches a service someone else started`;
}

function unsupported(options: VariantOptions): Promise<Target> {
  try {
    return Promise.reject(new HarnessError('HIL_ERR_VARIANT_UNSUPPORTED', cannotProvide(parseVariant(options))));
  } catch (e) {
    return Promise.reject(e);
  }
}

/** The external target's options (its schema below). */
export interface ExternalOptions {
  /** The control socket path. */
  socket?: string;
  allowMotion?: boolean;
  /** The weld planner's base URL (document 2 part 4 {planner_url}). */
  plannerUrl?: string;
  /** The offline programming server's base URL {olp_url} (document 3). */
  olpUrl?: string;
  /** The OLP server's deployment facts file (harness/targets/olp-facts.ts). */
  olpFacts?: string;
  /** The service's remote listener, https://{host}:{port} (document 1 part 1). */
  remoteUrl?: string;
  /** The pair directory the listener's credential files are in (`hil certs create-pair`). */
  remotePair?: string;
  /** The link profile of its cell (document 3 control.link_profile; lan when not given, as there). */
  remoteLinkProfile?: string;
  /** The file the service writes its log to. */
  serviceLog?: string;
  /** A file the remote listener serves as a compiled resource (GET /v1/resources/<its SHA-256>). */
  remoteResource?: string;
  /** The configured pair id and revision of its binding, when Describe does not report them (harness/targets/binding.ts). */
  pairId?: string;
  pairRevision?: string;
  /** A shell command that starts the service, `{socket_dir}` standing for its socket directory. */
  serveCommand?: string;
  /** The cell's machine configuration (document 3 part 2), for what Describe does not give. */
  machine?: string;
  /** The service's processes on this host, comma-separated process ids (the control service's first). */
  servicePid?: string;
}

const EXTERNAL_OPTIONS: readonly TargetOption[] = [
  { key: 'socket', flag: 'socket', value: 'PATH', env: 'HIL_SOCKET', required: true, path: true, help: 'the control socket of the service' },
  { key: 'allowMotion', flag: 'allow-motion', env: 'HIL_ALLOW_MOTION', help: 'allow tests that energise drives' },
  { key: 'machine', flag: 'machine', value: 'FILE', env: 'HIL_MACHINE', path: true, help: "the cell's machine configuration (document 3 part 2): the figures Describe does not give (following error, completion tolerance, jog acceleration, inputs); it must describe the same cell as Describe" },
  { key: 'plannerUrl', flag: 'planner-url', value: 'URL', env: 'HIL_PLANNER_URL', help: "the weld planner's base URL (planner suites skip without it)" },
  { key: 'olpUrl', flag: 'olp-url', value: 'URL', env: 'HIL_OLP_URL', help: "the offline programming server's base URL {olp_url} (OLP suites skip without it)" },
  { key: 'olpFacts', flag: 'olp-facts', value: 'FILE', env: 'HIL_OLP_FACTS', path: true, help: 'what discovery cannot tell of that server\'s deployment (README "Your own OLP server", harness/targets/olp-facts.ts)' },
  { key: 'remoteUrl', flag: 'remote-url', value: 'URL', env: 'HIL_REMOTE_URL', help: "the service's remote listener, https://HOST:PORT (remote suites skip without it)" },
  { key: 'remotePair', flag: 'remote-pair', value: 'DIR', env: 'HIL_REMOTE_PAIR', path: true, help: 'the pair directory (hil certs create-pair) whose files that listener serves (README "Your own remote listener")' },
  { key: 'remoteLinkProfile', flag: 'remote-link-profile', value: 'lan|internet', env: 'HIL_REMOTE_LINK_PROFILE', help: "its cell's control.link_profile (default lan): the header read bound judged" },
  { key: 'pairId', flag: 'pair-id', value: 'ID', env: 'HIL_PAIR_ID', help: "the binding's configured pair id, when Describe does not report it (document 1 part 2 Binding)" },
  { key: 'pairRevision', flag: 'pair-revision', value: 'N', env: 'HIL_PAIR_REVISION', help: 'the configured pair revision, with --pair-id' },
  { key: 'serveCommand', flag: 'serve-command', value: 'CMD', env: 'HIL_SERVE_COMMAND', help: 'a shell command that starts the service, {socket_dir} standing for its socket directory: the start-up flag tests run it with flags of their own' },
  { key: 'remoteResource', flag: 'remote-resource', value: 'FILE', env: 'HIL_REMOTE_RESOURCE', path: true, help: "a file that listener serves as a compiled resource (its robot description, say): GET /v1/resources/<its SHA-256> is judged against its bytes" },
  { key: 'serviceLog', flag: 'service-log', value: 'FILE', env: 'HIL_SERVICE_LOG', path: true, help: "the service's log file: the remote suites then also read why it refused (informative)" },
  { key: 'servicePid', flag: 'service-pid', value: 'PID[,PID...]', env: 'HIL_SERVICE_PID', help: "the service's processes when they run on this host (the control service's first, then an OLP server's, say): a timing rule they keep by acting in time counts the time this host kept them waiting to run as the host's, as for a stack the harness started" },
];

/** The process ids --service-pid names, or why they make no run. */
function servicePids(v: string): number[] | string {
  const ids = v.split(',').map((x) => x.trim());
  const bad = ids.find((x) => !/^[1-9][0-9]{0,9}$/.test(x));
  if (bad !== undefined) return `--service-pid ${v}: process ids, comma-separated (${JSON.stringify(bad)} is not one)`;
  for (const id of ids) {
    try {
      process.kill(Number(id), 0);
    } catch (e) {
      // EPERM: it exists, owned by someone else (its /proc entry is still readable).
      if ((e as NodeJS.ErrnoException).code !== 'EPERM') return `--service-pid ${v}: no process ${id} on this host`;
    }
  }
  return ids.map(Number);
}

/** Why the binding and remote listener options make no run (a usage error), or undefined. */
function checkOptions(o: ExternalOptions): string | undefined {
  if (o.machine !== undefined && !(existsSync(o.machine) && statSync(o.machine).isFile())) return `--machine ${o.machine}: no such file`;
  if (o.serveCommand !== undefined && !o.serveCommand.includes('{socket_dir}')) return `--serve-command ${o.serveCommand}: name the service's socket directory as {socket_dir}, so that each start has a directory of its own`;
  if ((o.pairId === undefined) !== (o.pairRevision === undefined)) return '--pair-id and --pair-revision go together: the binding needs both (document 1 part 2)';
  const uint64 = (v: string) => /^[1-9][0-9]{0,19}$/.test(v) && BigInt(v) < 1n << 64n;
  if (o.pairRevision !== undefined && !uint64(o.pairRevision)) return `--pair-revision ${o.pairRevision}: a nonzero uint64 (document 1 part 2 Binding)`;
  if (o.remotePair !== undefined && o.remoteUrl === undefined) return '--remote-pair needs --remote-url URL: the listener that serves the pair';
  if (o.remoteLinkProfile !== undefined && o.remoteUrl === undefined) return '--remote-link-profile needs --remote-url URL: the listener it describes';
  if (o.remoteResource !== undefined && o.remoteUrl === undefined) return '--remote-resource needs --remote-url URL: the listener that serves it';
  if (o.remoteResource !== undefined && !(existsSync(o.remoteResource) && statSync(o.remoteResource).isFile())) return `--remote-resource ${o.remoteResource}: no such file`;
  if (o.servicePid !== undefined) {
    const pids = servicePids(o.servicePid);
    if (typeof pids === 'string') return pids;
  }
  if (o.remoteUrl === undefined) return undefined;
  const m = /^https:\/\/([^/:]+|\[[0-9a-fA-F:]+\]):([0-9]{1,5})\/?$/.exec(o.remoteUrl);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) return `--remote-url ${o.remoteUrl}: not https://HOST:PORT`;
  if (o.remotePair === undefined) return '--remote-url needs --remote-pair DIR: the pair directory (hil certs create-pair) whose files the listener serves';
  for (const f of ['pair.json', 'ca.crt', 'ca.key', 'crl.pem', 'server.crt', 'server.key']) {
    if (!existsSync(join(o.remotePair, f))) return `--remote-pair ${o.remotePair}: no ${f} (make the directory with hil certs create-pair and start the listener on its files)`;
  }
  if (o.remoteLinkProfile !== undefined && o.remoteLinkProfile !== 'lan' && o.remoteLinkProfile !== 'internet') return `--remote-link-profile ${o.remoteLinkProfile}: lan or internet`;
  return undefined;
}

export const externalTarget: TargetDescriptor<ExternalOptions> = {
  name: 'external',
  summary: "someone else's control service reached at a Unix socket path",
  abilities: { variants: false, testStacks: false, testChannel: false, plant: false, watch: false, sharedService: true, motion: 'allow-motion' },
  options: EXTERNAL_OPTIONS,
  parse(env) {
    const v = envValues(EXTERNAL_OPTIONS, env);
    return {
      ...(str(v.socket) ? { socket: str(v.socket) } : {}),
      allowMotion: v.allowMotion === true,
      ...(str(v.machine) ? { machine: str(v.machine) } : {}),
      ...(str(v.plannerUrl) ? { plannerUrl: str(v.plannerUrl) } : {}),
      ...(str(v.olpUrl) ? { olpUrl: str(v.olpUrl) } : {}),
      ...(str(v.olpFacts) ? { olpFacts: str(v.olpFacts) } : {}),
      ...(str(v.remoteUrl) ? { remoteUrl: str(v.remoteUrl) } : {}),
      ...(str(v.remotePair) ? { remotePair: str(v.remotePair) } : {}),
      ...(str(v.remoteLinkProfile) ? { remoteLinkProfile: str(v.remoteLinkProfile) } : {}),
      ...(str(v.serviceLog) ? { serviceLog: str(v.serviceLog) } : {}),
      ...(str(v.remoteResource) ? { remoteResource: str(v.remoteResource) } : {}),
      ...(str(v.pairId) ? { pairId: str(v.pairId) } : {}),
      ...(str(v.pairRevision) ? { pairRevision: str(v.pairRevision) } : {}),
      ...(str(v.serveCommand) ? { serveCommand: str(v.serveCommand) } : {}),
      ...(str(v.servicePid) ? { servicePid: str(v.servicePid) } : {}),
    };
  },
  check: checkOptions,
  async open(o) {
    if (!o.socket) throw new HarnessError('HIL_ERR_TARGET_OPTION', 'the external target needs --socket PATH (HIL_SOCKET)');
    try {
      await access(o.socket);
    } catch {
      throw new HarnessError('HIL_ERR_TARGET_START', `no control socket at ${o.socket}`);
    }
    const pids = o.servicePid === undefined ? [] : servicePids(o.servicePid);
    if (typeof pids === 'string') throw new HarnessError('HIL_ERR_TARGET_OPTION', pids);
    const target = new ExternalTarget(o.socket, o.allowMotion ?? false, pids);
    if (o.machine !== undefined) {
      // A configuration that is not this cell's would be read as facts about it (limits, tolerances): the
      // run stops here instead of judging the service against another cell's figures.
      try {
        const d = await target.client().describe();
        const m = machineOf(d.reply.data as object, o.machine);
        if (m.config === undefined) throw new HarnessError('HIL_ERR_TARGET_OPTION', `--machine ${o.machine} does not describe the cell the service describes (axis ids, types and limits, cycle_ns, link profile); the service describes ${m}`);
      } catch (e) {
        await target.close();
        throw e;
      }
    }
    return target;
  },
  cannotProvide,
  openVariant: unsupported,
  // Someone else's service started by the command HIL_SERVE_COMMAND names, for the start-up flag tests.
  serviceCommand: (o) => o.serveCommand ?? { why: 'target external starts no service of its own: give --serve-command CMD, {socket_dir} standing for its socket directory (README "Your own remote listener")' },
  // Someone else's remote listener at HIL_REMOTE_URL, serving the files of the pair at HIL_REMOTE_PAIR.
  remoteListener: (o): RemoteListener | string => {
    if (o.remoteUrl === undefined) return 'target external reaches no remote listener: give --remote-url URL and --remote-pair DIR (README "Your own remote listener")';
    const why = checkOptions(o);
    if (why !== undefined) return why;
    if (!o.socket) return 'the external target needs --socket PATH (HIL_SOCKET)';
    return {
      url: o.remoteUrl.replace(/\/+$/, ''),
      pairDir: o.remotePair!,
      socket: o.socket,
      linkProfile: o.remoteLinkProfile === 'internet' ? 'internet' : 'lan',
      ...(o.serviceLog ? { log: o.serviceLog } : {}),
      ...(o.remoteResource ? { resource: o.remoteResource } : {}),
    };
  },
  // Someone else's weld planner at HIL_PLANNER_URL: no store to read, no stub hooks.
  openPlanner: (o) =>
    Promise.resolve(o.plannerUrl ? { endpoint: { url: o.plannerUrl.replace(/\/+$/, ''), stubHooks: false } satisfies PlannerEndpoint, close: () => Promise.resolve() } : undefined),
  // Someone else's OLP server at HIL_OLP_URL, configured by its owner: the suite's spec cannot be applied;
  // the suites discover its cells and read what discovery cannot tell from the facts file (olp-facts.ts).
  openOlp: (spec, o) => {
    if (!o.olpUrl) return Promise.resolve(undefined);
    try {
      const facts = olpFactsFromFile(o.olpFacts);
      // A suite that asks for a server with no catalogue, planner or worker gets the deployment's bare one
      // when the facts file names it.
      const bare = facts.bare_olp_url !== undefined && !spec.cells && spec.planner === 'none' && !spec.workers && !spec.localSimulator;
      // One that asks for a single-target server in front of a planner of its own gets the deployment's
      // own_planner server, whose planner address the suite listens on itself.
      const own = facts.own_planner !== undefined && !spec.cells && typeof spec.planner === 'object' && !spec.workers && !spec.localSimulator;
      const endpoint = bare
        ? { url: facts.bare_olp_url!, configured: false, facts: { ...facts, planner_stub: false }, bare: true }
        : own
          ? { url: facts.own_planner!.olp_url, configured: false, facts: { ...facts, planner_stub: false }, ownPlanner: true }
          : { url: o.olpUrl.replace(/\/+$/, ''), configured: false, facts, ...(facts.planner_url ? { plannerUrl: facts.planner_url } : {}) };
      return Promise.resolve({ endpoint, stderr: () => '', close: () => Promise.resolve() });
    } catch (e) {
      return Promise.reject(e);
    }
  },
};
