// The control plane's running parts over one event store: the live projection (ControlPlaneView), the command
// handlers (heartbeats go to the scheduler's agent-health rule, appends wake it), the scheduler, and the relay
// to the agents over the given transport. The embedded fabric and the distributed scheduler-relay process both
// start this; the HTTP APIs get the FabricContext it builds.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { BlobStore } from '../blobstore/port.js';
import { onDemandFromCatalog } from '../catalog/on-demand.js';
import type { FabricModelCatalog } from '../catalog/catalog.js';
import { RegisteredCatalog } from '../catalog/registered.js';
import { registerConfiguredModels, type StartupResult } from '../catalog/startup.js';
import { ControlPlaneCommands } from '../command-api/handlers/service.js';
import type { EventStore } from '../eventstore/port.js';
import type { FabricMetrics } from '../metrics/fabric-metrics.js';
import { ControlPlaneView } from '../projections/control-plane/live.js';
import type { SnapshotStore } from '../projections/runner/projection.js';
import { Scheduler } from '../scheduler/scheduler.js';
import type { SchedulerConfig } from '../scheduler/config.js';
import type { HotStateLimits } from '../projections/requests/state.js';
import type { Transport } from '../transport/port.js';
import type { LogLimits } from '../protocol/log-limits.js';
import { Relay } from '../transport/relay/relay.js';
import { DEFAULT_TOPICS, type RelayTopics } from '../transport/relay/wire.js';
import type { FabricContext } from './context.js';
import { LeaderCommands } from './leader-commands.js';
import { ResultReaper } from './result-reaper.js';
import type { OnDemandDefaults } from './scheduler-env.js';

export interface ControlPlaneOptions {
  store: EventStore;
  snapshots: SnapshotStore;
  transport: Transport;
  blobs: BlobStore;
  /**
   * The model folders configured on this machine (NDIF_MODELS): registered at start with the same command as
   * `POST /models`, and where manifests are computed and cached. What is served is what is registered.
   */
  catalog: FabricModelCatalog;
  log: Logger;
  clock?: () => number;
  topics?: RelayTopics;
  /** The relay's consumer group on the agent-events topic (default ndif-relay). */
  relayGroupId?: string;
  scheduler?: Partial<Omit<SchedulerConfig, 'onDemand'>>;
  /** How much finished history the view keeps in memory (NDIF_VIEW_RECENT_FINISHED, fabric/view-env.ts). */
  hot?: Partial<HotStateLimits>;
  /** Settings every on-demand deployment gets on top of its catalog entry's (e.g. a shorter minimum deployment time). */
  onDemandDefaults?: OnDemandDefaults;
  /** What each attempt may log (default DEFAULT_LOG_LIMITS; NDIF_LOG_MAX_LINES / NDIF_LOG_MAX_BYTES). */
  logLimits?: LogLimits;
  /** Run the scheduler and relay here (default true). The API-only processes of distributed mode pass false. */
  schedule?: boolean;
  /** Register the configured folders at start (default true; the query API, which only reads, passes false). */
  registerModels?: boolean;
  /**
   * This process's metrics: the store's appends are timed (labelled `storeKind`), and once started the view's lag
   * and the relay's are exported. What else the process counts, its root attaches (FabricMetrics.watch…).
   */
  metrics?: FabricMetrics;
  storeKind?: string;
}

export class ControlPlane {
  readonly view: ControlPlaneView;
  readonly commands: ControlPlaneCommands;
  readonly scheduler: Scheduler | undefined;
  readonly relay: Relay | undefined;
  readonly reaper: ResultReaper | undefined;
  readonly context: FabricContext;
  /** What is served: the registered models. */
  readonly catalog: RegisteredCatalog;
  /** The NDIF_MODELS registration of the last start. */
  startupModels: StartupResult | undefined;

  private readonly store: EventStore;
  /** The scheduler's commands: with the leader epoch of lead(epoch), when given. */
  private readonly leaderCommands: LeaderCommands;

  constructor(private readonly options: ControlPlaneOptions) {
    const clock = options.clock ?? Date.now;
    const log = options.log;
    const store = options.metrics
      ? options.metrics.instrumentStore(options.store, options.storeKind ?? 'unknown')
      : options.store;
    this.store = store;
    this.view = new ControlPlaneView(store, options.snapshots, {
      onListenerError: (err) => log.error({ err }, 'control-plane view listener failed'),
      hot: options.hot,
    });
    this.catalog = new RegisteredCatalog(() => this.view.state.models, options.catalog);
    let scheduler: Scheduler | undefined;
    this.commands = new ControlPlaneCommands(store, {
      logLimits: options.logLimits,
      onHeartbeat: (agentId, bootId, at) => scheduler?.observeHeartbeat(agentId, bootId, Date.parse(at)),
      heartbeatIsRoutine: (agentId, bootId) => {
        const a = this.view.state.agents.byId.get(agentId);
        return a !== undefined && a.bootId === bootId && (a.state === 'ACTIVE' || a.state === 'DRAINING');
      },
    });
    this.leaderCommands = new LeaderCommands(this.commands);
    if (options.schedule !== false) {
      scheduler = new Scheduler({
        view: this.view,
        commands: this.leaderCommands,
        clock,
        config: {
          ...options.scheduler,
          onDemand: withDefaults(onDemandFromCatalog(this.catalog), options.onDemandDefaults),
        },
        onError: (err) => log.error({ err }, 'scheduler step failed'),
      });
      this.reaper = new ResultReaper(this.view, options.blobs, log, store);
      this.relay = new Relay({
        store,
        snapshots: options.snapshots,
        transport: options.transport,
        blobs: options.blobs,
        commands: this.commands,
        log,
        clock,
        topics: options.topics,
        groupId: options.relayGroupId,
      });
    }
    this.scheduler = scheduler;
    this.context = {
      store,
      commands: this.commands,
      view: this.view,
      blobs: options.blobs,
      catalog: this.catalog,
      localModels: options.catalog,
      clock,
      newId: randomUUID,
      log,
      ...(options.metrics ? { metrics: options.metrics } : {}),
    };
  }

  /** Catches the view up (from its snapshot), registers the configured models, then starts the relay and the scheduler. */
  async start(): Promise<void> {
    await this.follow();
    await this.lead();
  }

  /**
   * Starts the live view, catches it up and registers the configured models (idempotent: every scheduler-relay
   * registers the same folders). A standby scheduler-relay then keeps following the log.
   */
  async follow(): Promise<void> {
    await this.view.start();
    await this.view.catchUp(120_000);
    if (this.options.registerModels !== false) {
      const clock = this.options.clock ?? Date.now;
      this.startupModels = await registerConfiguredModels(
        { local: this.options.catalog, commands: this.commands, view: this.view },
        this.options.catalog,
        () => new Date(clock()).toISOString(),
        this.options.log,
      );
      if (this.startupModels.position !== undefined)
        await this.view.waitForPosition(this.startupModels.position, 60_000);
    }
  }

  /**
   * Starts the scheduler, the relay and the reaper. With `leaderEpoch` (the epoch of this process's leader lease)
   * every command the scheduler issues carries it (docs/control-plane.md, "Several schedulers").
   */
  async lead(leaderEpoch?: number): Promise<void> {
    this.leaderCommands.epoch = leaderEpoch;
    await this.view.catchUp(120_000);
    // The scheduler first: a new leader decides at once; the relay's consumer group may wait for a dead
    // member's session to time out before it gets its partitions.
    this.scheduler?.start();
    await this.relay?.start();
    this.reaper?.start();
    const m = this.options.metrics;
    if (m !== undefined) {
      m.watchProjections(this.store, () => [{ name: 'control-plane', position: this.view.position }]);
      if (this.relay !== undefined)
        m.watchRelay(this.relay, this.store, {
          agentEvents: (this.options.topics ?? DEFAULT_TOPICS).agentEvents,
          group: this.options.relayGroupId ?? 'ndif-relay',
        });
    }
  }

  async stop(): Promise<void> {
    await this.scheduler?.stop();
    await this.relay?.stop();
    await this.reaper?.stop();
    await this.view.stop();
  }
}

function withDefaults(
  onDemand: SchedulerConfig['onDemand'],
  defaults: OnDemandDefaults | undefined,
): SchedulerConfig['onDemand'] {
  if (defaults === undefined || Object.keys(defaults).length === 0) return onDemand;
  return (modelKey) => {
    const spec = onDemand(modelKey);
    return spec === undefined ? undefined : { settings: { ...defaults, ...spec.settings } };
  };
}
