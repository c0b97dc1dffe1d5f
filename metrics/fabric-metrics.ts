// One process's metrics: its registry and the parts that feed it. A composition root makes one (when
// NDIF_METRICS is not off), wraps its event store, and attaches what the process runs: the control-plane view
// (gauges; request metrics where this process is the one counting them), the relay, a GPU agent. The HTTP APIs
// find it in their context (FabricContext.metrics) and serve GET /metrics; the processes without an API serve it
// on their health port.
import type { Registry } from 'prom-client';
import type { EventStore } from '../eventstore/port.js';
import type { ControlPlaneView } from '../projections/control-plane/live.js';
import type { Relay } from '../transport/relay/relay.js';
import { controlPlaneGauges } from './control-plane.js';
import { timedEventStore } from './event-store.js';
import { ProjectionLag, type ProjectionSource } from './projections.js';
import { newRegistry } from './registry.js';
import { relayMetrics } from './relay.js';
import { RequestMetrics } from './requests.js';

export class FabricMetrics {
  readonly registry: Registry = newRegistry();
  /** More text for this process's /metrics: another process's families it lacks (the embedded agent child's). */
  alsoExport: (() => Promise<string>) | undefined;
  private requestMetrics: RequestMetrics | undefined;
  private lag: ProjectionLag | undefined;

  /** The store with its appends timed (ndif_event_store_append_seconds). */
  instrumentStore(store: EventStore, kind: string): EventStore {
    return timedEventStore(store, this.registry, kind);
  }

  /** Queue, replica, agent and GPU gauges from the view (read at scrape time). */
  watchControlPlane(view: ControlPlaneView, clock: () => number): void {
    controlPlaneGauges(this.registry, view, clock);
  }

  /** Adds projections to ndif_projection_lag_events (the gauges are made on the first call, over `store`). */
  watchProjections(store: EventStore, source: ProjectionSource): void {
    this.lag ??= new ProjectionLag(this.registry, store);
    this.lag.add(source);
  }

  /**
   * Request outcomes and phase latencies from the events the view applies from now on. One process per fabric
   * counts them (embedded: the one; distributed: the query API), so that a sum over processes counts each once.
   */
  watchRequests(view: ControlPlaneView): void {
    this.requests.attach(view);
  }

  /**
   * The request metrics, made on first use: the HTTP layer adds the `submit` phase and the websocket the `notify`
   * phase wherever they run (distributed: submissions reach the command API, statuses leave the query API).
   */
  get requests(): RequestMetrics {
    this.requestMetrics ??= new RequestMetrics(this.registry);
    return this.requestMetrics;
  }

  watchRelay(relay: Relay, store: EventStore, topics: { agentEvents: string; group: string }): void {
    relayMetrics(this.registry, relay, store, topics);
  }
}
