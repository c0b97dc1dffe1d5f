// What a fault test needs from a running fabric, whichever mode it runs in (the harness parameter): the URLs a
// user and an operator talk to, the pid of the GPU agent process and the control-plane process to kill, a way
// back after a kill, and the event log to check against. `embedded.ts` starts `npm start`'s processes;
// `distributed.ts` the separate processes of distributed mode.
import type { EventStore, StoredEvent } from '../../eventstore/port.js';
import type { FabricProcess, LoggedLine } from './process.js';

export type FabricMode = 'embedded' | 'distributed';

export interface FaultFabric {
  mode: FabricMode;
  /** Where commands go (submit, cancel, deploy, evict). */
  readonly commandUrl: string;
  /** Where reads and the status websocket are. */
  readonly queryUrl: string;
  /** The agent's id as the control plane knows it. */
  agentId: string;
  /** Headers of an operator's calls (an API key with auth on; nothing with auth off). */
  operatorHeaders: Record<string, string>;
  /** With `apiKeys`: each key by its label. */
  keys: Map<string, string>;
  /** The GPU agent process now (undefined while it is down). */
  agentPid(): number | undefined;
  /** kill -9 the agent process; it comes back (restarted by the embedded fabric, by the harness in distributed mode). */
  killAgent(): Promise<KilledAgent>;
  /** Freezes (SIGSTOP) / thaws (SIGCONT) the agent process: it stops heartbeating without exiting. */
  freezeAgent(): void;
  thawAgent(): void;
  /** Resolves once another agent process runs and the control plane sees its new boot ACTIVE; returns the boot id. */
  agentBack(killed: KilledAgent, timeoutMs?: number): Promise<string>;
  /** kill -9 the process that acknowledges commands (the embedded process; the command API distributed). */
  killControlPlane(): Promise<void>;
  /** Starts what killControlPlane killed, over the same store. */
  restartControlPlane(): Promise<void>;
  /** SIGTERM to what killControlPlane would kill (it saves its projection snapshot), then starts it again. */
  restartControlPlaneCleanly(): Promise<void>;
  /** A connection to the fabric's event store (the test closes it). */
  openStore(): Promise<{ store: EventStore; close(): Promise<void> }>;
  /** Error lines logged by every process of the fabric so far. */
  loggedErrors(): LoggedLine[];
  processes(): FabricProcess[];
  /** SIGTERM everything; resolves with each process's exit code. */
  stop(): Promise<Array<{ name: string; code: number | null }>>;
  /** stop(), then remove the data. */
  close(): Promise<void>;
}

export interface KilledAgent {
  pid: number;
  /** The boot the control plane knew when it was killed. */
  bootId: string | null;
}

export interface FaultFabricOptions {
  /** Embedded: killControlPlane kills only the control-plane process, which the fabric's supervisor restarts. */
  killControlPlaneOnly?: boolean;
  /** Extra environment for every process. */
  env?: NodeJS.ProcessEnv;
  /** Declared GPUs of the agent (default 1x16GiB). */
  gpus?: string;
  /** NDIF_MODELS (gpt2-tiny is always served). */
  models?: string;
  /** Reuse this data folder (and keep it on close). */
  dataDir?: string;
  /** Turns auth on with these API keys (made in the key store before the fabric starts); the first operator key is the harness's. */
  apiKeys?: Array<{ label: string; trusted?: boolean; operator?: boolean; priority?: boolean }>;
}

/**
 * Scheduler knobs scaled so that what takes minutes in production takes a second or two (docs/reliability.md).
 * The heartbeat timeout stays above the 1.7–2.9 s for which loading a model blocks the agent's event loop (and
 * so its heartbeats) on this machine.
 */
export const COMPRESSED_TIME: NodeJS.ProcessEnv = {
  NDIF_AGENT_HEARTBEAT_MS: '250',
  NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS: '4000',
  NDIF_SCHEDULER_AGENT_GRACE_MS: '15000',
  NDIF_SCHEDULER_AUTOSCALE_CHECK_MS: '250',
  NDIF_SCHEDULER_TICK_MS: '100',
  NDIF_ONDEMAND_MIN_DEPLOYMENT_MS: '0',
  NDIF_ONDEMAND_AUTOSCALE_THRESHOLD_MS: '2000',
  NDIF_ONDEMAND_AUTOSCALE_BACKOFF_MS: '3000',
  NDIF_AGENT_RESTART_MS: '100',
  NDIF_AGENT_RESTART_RESET_MS: '1000',
};

/** Every event of the log, in order. */
export async function readLog(store: EventStore): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let after = 0; ; ) {
    const page = await store.readAll({ afterPosition: after, limit: 10_000 });
    if (page.length === 0) return out;
    out.push(...page);
    after = page[page.length - 1]!.position;
  }
}

/** Events of one request's stream, from a log. */
export function requestStream(log: StoredEvent[], requestId: string): StoredEvent[] {
  return log.filter((e) => e.streamId === `request-${requestId}`);
}
