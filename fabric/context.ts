// What the HTTP APIs (command-api/http, query-api) are given by a composition root (fabric/embedded,
// fabric/command-api, fabric/query-api). Every part is a port; the roots pick the adapters.
import type { Logger } from 'pino';
import type { BlobStore } from '../blobstore/port.js';
import type { FabricModelCatalog } from '../catalog/catalog.js';
import type { ModelCatalog } from '../catalog/port.js';
import type { ControlPlaneCommands } from '../command-api/handlers/service.js';
import type { EventStore } from '../eventstore/port.js';
import type { FabricMetrics } from '../metrics/fabric-metrics.js';
import type { ControlPlaneView } from '../projections/control-plane/live.js';
import type { QueryReadModels } from '../projections/read-models/port.js';

/** A process this fabric supervises that refused its configuration and is not started again (embedded mode). */
export interface ProcessFault {
  process: 'agent';
  agentId: string;
  /** The coded error it exited with (e.g. AGENT_HEALTH_PORT_IN_USE). */
  code: string;
  message: string;
  at: string;
}

/** How often the embedded fabric restarted its control plane, and how the last one that died ended. */
export interface ControlPlaneRestarts {
  restarts: number;
  lastExit: { pid: number; code: number | null; signal: string | null; at: string; stderrTail: string[] } | null;
}

export interface FabricContext {
  store: EventStore;
  commands: ControlPlaneCommands;
  /** The live control-plane projection (cluster, queue, requests, agents, audit). */
  view: ControlPlaneView;
  blobs: BlobStore;
  /** The registered models (what the fabric serves). */
  catalog: ModelCatalog;
  /** This process's model folders and their manifest cache: `POST /models` inspects folders through it. */
  localModels: FabricModelCatalog;
  /** Milliseconds since the epoch; the only clock the APIs read. */
  clock: () => number;
  /** A fresh unique id (uuid v4 unless a test injects another). */
  newId: () => string;
  log: Logger;
  /**
   * The PostgreSQL read models (distributed mode's query API): request status, history and audit are read from
   * them instead of the event store and `view`. Queue positions and cluster views still come from `view`.
   */
  readModels?: QueryReadModels;
  /**
   * The audit index by model over the whole log (embedded mode, SQLite): `audit --model` reads it, while the view's
   * audit index keeps only recent events (docs/control-plane.md, "Bounded hot state").
   */
  auditModels?: {
    catchUp(timeoutMs: number): Promise<void>;
    positions(modelKey: string, afterPosition: number, limit: number): Promise<number[]>;
  };
  /**
   * Commands are appended by other processes (distributed mode's query API): each read first waits until `view`
   * holds everything stored when the read arrived, so a client reads its own writes made through the command API.
   */
  catchUpBeforeReads?: boolean;
  /** Restarts of the control-plane process by its supervisor (embedded mode): the operator's `/cluster` shows them. */
  controlPlaneRestarts?: () => ControlPlaneRestarts;
  /** Faults of the processes this fabric supervises (embedded mode): `/agents` and `/cluster` show them. */
  processFaults?: () => ProcessFault[];
  /** This process's metrics (absent with NDIF_METRICS=off): the APIs serve GET /metrics and time their calls. */
  metrics?: FabricMetrics;
}
