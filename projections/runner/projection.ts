// What the projection runner runs, and what it reports. Two kinds of projection:
// - a state projection folds events into an in-memory state (pure `apply`); the runner snapshots it with its
//   checkpoint position in one row;
// - a read-model projection writes rows through a transaction; the runner commits the rows of a batch and the
//   checkpoint position in the same transaction.
import { FabricError } from '../../protocol/errors.js';
import type { JsonValue, StoredEvent } from '../../eventstore/port.js';

export interface Projection<State> {
  /** Unique among projections: lowercase letters, digits, '-' and '_', up to 63 characters. */
  name: string;
  /** Positive integer; a different version than the checkpoint's rebuilds from position 0. */
  version: number;
  initialState(): State;
  /** Pure: the state after the event. Throwing stops the projection at this event (it is never skipped). */
  apply(state: State, event: StoredEvent): State;
  /** State → JSON for the snapshot. Default: the state itself (it must then be JSON). */
  toSnapshot?(state: State): JsonValue;
  /** Snapshot JSON → state. Default: the JSON itself. */
  fromSnapshot?(snapshot: JsonValue): State;
}

export interface ReadModelProjection<Tx> {
  name: string;
  version: number;
  /** Creates the read model's tables when missing. Runs in a transaction at start. */
  setup(tx: Tx): Promise<void> | void;
  /** Empties the read model before a rebuild from position 0 (first start or version change). */
  reset(tx: Tx): Promise<void> | void;
  /** Writes the rows for one event. Throwing stops the projection at this event. */
  handle(event: StoredEvent, tx: Tx): Promise<void> | void;
}

export interface Checkpoint {
  name: string;
  version: number;
  /** Position of the last event included. */
  position: number;
  /** The state projection's snapshot at `position`; absent for read models. */
  snapshot?: JsonValue;
}

/** A checkpoint to write; the snapshot is serialized by the runner when it is taken. */
export interface CheckpointWrite {
  name: string;
  version: number;
  position: number;
  /** JSON text of the snapshot, or null for read models. */
  snapshotJson: string | null;
}

/** Where a state projection keeps its snapshot + checkpoint (one row, written atomically). */
export interface SnapshotStore {
  /** The checkpoint; a snapshot written by parts comes back assembled (each part parsed on its own). */
  load(name: string): Promise<Checkpoint | undefined>;
  save(checkpoint: CheckpointWrite): Promise<void>;
  /**
   * Writes the checkpoint with its snapshot as parts (projections/runner/snapshot-parts.ts), atomically with the
   * position. Stores without it get one JSON text.
   */
  saveParts?(checkpoint: Omit<CheckpointWrite, 'snapshotJson'>, parts: readonly string[]): Promise<void>;
}

/** A transactional database for read models: rows and checkpoint commit together. */
export interface ReadModelTarget<Tx> {
  /** Runs `fn` in one transaction: committed when it resolves, rolled back when it (or the commit) fails. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  loadCheckpoint(tx: Tx, name: string): Promise<Checkpoint | undefined>;
  saveCheckpoint(tx: Tx, checkpoint: CheckpointWrite): Promise<void>;
}

export interface ProjectionFailure {
  position: number;
  eventId: string;
  streamId: string;
  type: string;
  error: { message: string; code?: string };
}

export type RebuildReason = 'no-checkpoint' | 'version-changed' | 'snapshot-unreadable';

export interface ProjectionStatus {
  name: string;
  version: number;
  /** starting → rebuilding (behind the head seen at start) → live; failed and stopped are final. */
  phase: 'starting' | 'rebuilding' | 'live' | 'failed' | 'stopped';
  /** Position of the last event applied. */
  position: number;
  /** Position of the last durable checkpoint. */
  checkpointPosition: number;
  /** Head of the store when the runner started. */
  headAtStart: number;
  /** Set when the runner started from position 0 rather than a checkpoint. */
  rebuiltBecause?: RebuildReason;
  eventsApplied: number;
  /** The event the projection stopped at, when applying it threw. */
  failure?: ProjectionFailure;
  /** Why the runner stopped when no event was at fault (the store or the read-model database failed). */
  error?: { message: string; code?: string };
  /** The last snapshot write that failed (the runner keeps going and tries again at the next snapshot). */
  snapshotError?: string;
}

export const ProjectionErrorCode = {
  failed: 'PR_PROJECTION_FAILED',
  invalid: 'PR_INVALID_PROJECTION',
  notRunning: 'PR_NOT_RUNNING',
  waitTimeout: 'PR_WAIT_TIMEOUT',
} as const;

const NAME = /^[a-z][a-z0-9_-]{0,62}$/;

export function checkProjectionIdentity(p: { name: unknown; version: unknown }): void {
  if (typeof p.name !== 'string' || !NAME.test(p.name)) {
    throw new FabricError(
      ProjectionErrorCode.invalid,
      400,
      `projection name ${JSON.stringify(p.name)} is not valid: use lowercase letters, digits, '-' and '_' (up to 63), starting with a letter`,
    );
  }
  if (typeof p.version !== 'number' || !Number.isSafeInteger(p.version) || p.version < 1) {
    throw new FabricError(
      ProjectionErrorCode.invalid,
      400,
      `projection ${p.name} has version ${JSON.stringify(p.version)}; a version is a positive integer`,
    );
  }
}

export function describeError(error: unknown): { message: string; code?: string } {
  const e = error as { message?: unknown; code?: unknown };
  const message = typeof e?.message === 'string' ? e.message : String(error);
  return typeof e?.code === 'string' ? { message, code: e.code } : { message };
}

export function describeFailure(event: StoredEvent, error: unknown): ProjectionFailure {
  return {
    position: event.position,
    eventId: event.id,
    streamId: event.streamId,
    type: event.type,
    error: describeError(error),
  };
}

export function failedError(status: ProjectionStatus): FabricError {
  const { name, failure } = status;
  if (failure === undefined) {
    return new FabricError(
      ProjectionErrorCode.failed,
      500,
      `projection ${name} stopped at position ${status.position}: ${status.error?.message ?? 'unknown error'}`,
      {
        hint: 'the event store or the read-model database failed; restart the projection when it is reachable',
        details: { position: status.position, error: status.error },
      },
    );
  }
  return new FabricError(
    ProjectionErrorCode.failed,
    500,
    `projection ${name} stopped at event ${failure.eventId} (${failure.type}, stream ${failure.streamId}, position ${failure.position}): ${failure.error.message}`,
    {
      hint: 'fix the projection (and bump its version if its output changes), then restart it; the event is not skipped',
      details: { ...failure },
    },
  );
}
