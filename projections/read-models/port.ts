// What the query API reads from the read models in distributed mode (fabric/context.ts `readModels`). The
// PostgreSQL adapter is ./postgres.ts; without read models the query API reads the event store and the live view.
import type { StoredEvent } from '../../eventstore/port.js';
import type { RequestView } from '../requests/state.js';
import type { ProjectionStatus } from '../runner/projection.js';

export interface RequestRow {
  view: RequestView;
  /** Position of the last event folded into `view`. */
  position: number;
}

export interface RequestReadModel {
  /** Resolves once the rows include every event up to `position`; rejects when the read model failed or timed out. */
  waitForPosition(position: number, timeoutMs: number): Promise<void>;
  /** Resolves once the rows include every event stored when this was called (read your writes). */
  catchUp(timeoutMs: number): Promise<void>;
  get(requestId: string): Promise<RequestRow | undefined>;
  /** The events of the request's stream, in order. */
  events(requestId: string): Promise<StoredEvent[]>;
}

/** An audit query for the index: every filter applies (they are ANDed), positions after `afterPosition`. */
export interface AuditIndexFilter {
  modelKey?: string;
  actor?: string;
  correlationId?: string;
  causationId?: string;
  type?: string;
  streamPrefix?: string;
  /** Inclusive, ISO-8601 UTC. */
  fromAt?: string;
  /** Exclusive, ISO-8601 UTC. */
  toAt?: string;
  afterPosition: number;
  limit: number;
}

export interface AuditReadModel {
  catchUp(timeoutMs: number): Promise<void>;
  /** Ascending positions of the events matching every filter, at most `limit`. */
  positions(filter: AuditIndexFilter): Promise<number[]>;
}

export interface QueryReadModels {
  /** What they are, for start-up lines (no credentials). */
  readonly describe: string;
  readonly requests: RequestReadModel;
  readonly audit: AuditReadModel;
  status(): ProjectionStatus[];
}
