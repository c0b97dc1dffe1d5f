// The GPU agent: registers its GPUs (a new boot id per start), heartbeats, follows its assignments on the
// transport and acts on them (replicas.ts, requests.ts), and reports back through the agent-events topic. It
// holds no event-store credentials: the transport and the blob store are all it talks to.
//
// Assignments are handled in order and each handler returns at once (a load or a run goes on in the background),
// so an abort never waits behind a long load. An assignment for another boot (sent to an earlier process of this
// agent) or a position already seen (a republished or redelivered message) is ignored.
import { randomUUID } from 'node:crypto';
import { assignmentsGroupId } from './assignments-group.js';
import type { Logger } from 'pino';
import type { BlobStore } from '../../blobstore/port.js';
import type { AgentExit } from '../../domain/events/index.js';
import type { LocalModels } from './replicas.js';
import { readJson } from '../../transport/json.js';
import type { Subscription, Transport, TransportMessage } from '../../transport/port.js';
import {
  agentAssignmentsTopic,
  agentInboundSchema,
  type AgentInbound,
  type RefusedNotice,
} from '../../transport/relay/wire.js';
import type { AgentConfig } from './config.js';
import { ReplicaHost, type ReplicaView } from './replicas.js';
import { RequestExecutor, type UntrustedOpener } from './requests.js';
import { Reporter } from './reporter.js';

export interface GpuAgentOptions {
  config: AgentConfig;
  transport: Transport;
  blobs: BlobStore;
  /** The model folders on this machine (NDIF_MODELS). */
  catalog: LocalModels;
  log: Logger;
  /** Opens sandbox runners for untrusted blocks; absent: untrusted requests fail with AGENT_SANDBOX_UNAVAILABLE. */
  untrusted?: UntrustedOpener;
  /** Default: a random UUID (every start is a new boot). */
  bootId?: string;
  /** How the previous process of this agent ended, sent with the registration (last-words.ts). */
  previousExit?: AgentExit;
  clock?: () => number;
}

export interface AgentHealth {
  agentId: string;
  bootId: string;
  registered: boolean;
  lastPosition: number;
  replicas: ReplicaView[];
  running: number;
  completed: number;
  failed: number;
}

const REREGISTER_CODES = new Set(['CP_AGENT_LOST', 'CP_AGENT_NOT_FOUND']);

export class GpuAgent {
  readonly bootId: string;
  readonly replicas: ReplicaHost;
  readonly requests: RequestExecutor;
  private readonly reporter: Reporter;
  private subscription: Subscription | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastPosition = 0;
  private registered = false;
  private lastRegisterAt = 0;
  private stopped = false;

  constructor(private readonly options: GpuAgentOptions) {
    const { config, transport, log } = options;
    this.bootId = options.bootId ?? randomUUID();
    this.reporter = new Reporter(transport, config.topics.agentEvents, config.agentId, this.bootId, log, options.clock);
    this.replicas = new ReplicaHost(
      config.agentId,
      options.catalog,
      this.reporter,
      log,
      config.provider,
      config.batchRows,
      config.prefixCacheBytes,
    );
    this.requests = new RequestExecutor(
      config.agentId,
      this.replicas,
      this.reporter,
      options.blobs,
      log,
      config.maxRunMs,
      options.untrusted,
      {
        log: config.logLimits,
        logLinesPerSecond: config.logLinesPerSecond,
        resultMaxBytes: config.resultMaxBytes,
        resultStreamMinBytes: config.resultStreamMinBytes,
        progressIntervalMs: config.progressIntervalMs,
        startHoldMs: config.startHoldMs,
      },
    );
  }

  get agentId(): string {
    return this.options.config.agentId;
  }

  health(): AgentHealth {
    return {
      agentId: this.agentId,
      bootId: this.bootId,
      registered: this.registered,
      lastPosition: this.lastPosition,
      replicas: this.replicas.view(),
      running: this.requests.inFlight,
      completed: this.requests.completed,
      failed: this.requests.failed,
    };
  }

  /** The topic this agent's assignments come on: its own. */
  get assignmentsTopic(): string {
    return agentAssignmentsTopic(this.options.config.topics.assignments, this.options.config.agentId);
  }

  /** The consumer group this agent reads its assignments with. */
  get assignmentsGroup(): string {
    return assignmentsGroupId(this.options.config.agentId, this.assignmentsTopic);
  }

  /** The transport's consumer lag of this agent's assignments subscription (empty where delivery is immediate). */
  assignmentLag(): { partition: number; messages: number }[] {
    return this.subscription?.lag?.() ?? [];
  }

  /** Subscribes first (so nothing sent to the new boot is missed), then registers and starts heartbeating. */
  async start(): Promise<void> {
    const { config, transport, log } = this.options;
    // Its own topic; a group without a committed position starts at the next message: everything for this boot
    // is published after it registers, below, and what came before was for earlier boots.
    // In batches: assignments that queued while a forward pass held this process's event loop (onnxruntime's run is
    // synchronous) arrive together, and the requests among them reach the model together and run as one batch
    // (gpu-agent/runtime/serving/batcher.ts). One at a time, each took a delivery round trip behind the next pass.
    this.subscription = await transport.subscribeBatch(
      this.assignmentsTopic,
      this.assignmentsGroup,
      // A batch delivered again after a failure skips what was handled already (positions only grow).
      async (ms) => {
        for (const m of ms) this.onMessage(m);
      },
      {
        fromBeginning: false,
        onError: (err) => log.error({ err }, 'assignment handler failed; delivered again'),
      },
    );
    await this.register();
    this.heartbeat = setInterval(() => this.beat(), config.heartbeatMs);
    this.heartbeat.unref();
    log.info({ agentId: config.agentId, bootId: this.bootId, gpus: config.gpus.length }, 'agent registered');
  }

  private register(): Promise<void> {
    const c = this.options.config;
    this.lastRegisterAt = Date.now();
    const id = this.reporter.nextMessageId();
    const previousExit = this.options.previousExit;
    const command = {
      type: 'RegisterAgent' as const,
      agentId: c.agentId,
      bootId: this.bootId,
      gpus: c.gpus,
      ramBytes: c.ramBytes,
      ...(c.cpuCacheBudgetBytes === undefined ? {} : { cpuCacheBudgetBytes: c.cpuCacheBudgetBytes }),
      ...(previousExit === undefined ? {} : { previousExit }),
    };
    return this.reporter.send(id, command).then(() => {
      this.registered = true;
    });
  }

  private beat(): void {
    if (this.stopped) return;
    void this.reporter.send(this.reporter.nextMessageId(), {
      type: 'ReportAgentHeartbeat',
      agentId: this.agentId,
      bootId: this.bootId,
    });
  }

  private onMessage(m: TransportMessage): void {
    if (m.key !== this.agentId || this.stopped) return;
    let parsed: AgentInbound;
    try {
      const r = agentInboundSchema.safeParse(readJson(m));
      if (!r.success) throw new Error(r.error.issues[0]?.message ?? 'invalid');
      parsed = r.data as unknown as AgentInbound;
    } catch (err) {
      this.options.log.warn({ err, offset: m.offset }, 'assignment is not readable; skipped');
      return;
    }
    if (parsed.agentId !== this.agentId || parsed.bootId !== this.bootId) return;
    if (parsed.kind === 'refused') {
      this.onRefused(parsed);
      return;
    }
    if (parsed.position <= this.lastPosition) return;
    this.lastPosition = parsed.position;
    switch (parsed.kind) {
      case 'load':
      case 'demote':
      case 'unload':
        this.replicas.apply(parsed);
        return;
      case 'run':
        this.requests.run(parsed);
        return;
      case 'abort':
        this.requests.abort(parsed);
        return;
    }
  }

  private onRefused(n: RefusedNotice): void {
    const log = this.options.log;
    if (n.commandType === 'ReportAgentHeartbeat' && REREGISTER_CODES.has(n.code)) {
      if (Date.now() - this.lastRegisterAt < this.options.config.heartbeatMs) return;
      log.warn({ code: n.code }, `heartbeat refused (${n.message}); registering again`);
      this.registered = false;
      void this.register();
      return;
    }
    if (n.commandType === 'RegisterAgent') this.registered = false;
    const level = n.code === 'CP_AGENT_BOOT_MISMATCH' || n.commandType === 'RegisterAgent' ? 'error' : 'warn';
    log[level](
      { code: n.code, command: n.commandType, agentMessageId: n.agentMessageId },
      `control plane refused a report: ${n.message}`,
    );
  }

  /** Stops heartbeating and taking assignments, aborts running requests (unreported: the next boot gets them requeued), closes the models. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat);
    await this.subscription?.close();
    await this.requests.close();
    await this.replicas.close();
    this.reporter.stop();
  }
}
