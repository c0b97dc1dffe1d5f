// Runs a state projection: restores its snapshot (or rebuilds from position 0 when there is none, the version
// changed, or the snapshot is unreadable), then follows the store live. Snapshot and checkpoint position are one
// row, written every N events or T ms of activity, when it catches up and stays idle, and on stop. An apply that
// throws stops the runner at that event: the state stays as of the event before, and that is what is saved.
import type { EventStore, JsonValue, StoredEvent, Subscription, SubscriptionEnd } from '../../eventstore/port.js';
import { DEFAULT_PART_BYTES, snapshotParts } from './snapshot-parts.js';
import { Progress } from './progress.js';
import {
  checkProjectionIdentity,
  describeError,
  describeFailure,
  type Projection,
  type ProjectionStatus,
  type RebuildReason,
  type SnapshotStore,
} from './projection.js';

export interface StateRunnerOptions {
  /** Snapshot after this many applied events. Default 50000 (a snapshot serializes the whole state). */
  snapshotEveryEvents?: number;
  /** Snapshot when this long has passed since the last one and events were applied, and when idle. Default 1000 ms. */
  snapshotEveryMs?: number;
  /** Largest part of a snapshot written by parts (about; one element larger than this stays whole). Default 1 MiB. */
  snapshotPartBytes?: number;
  /** Events read per page while catching up. Default 1000. */
  batchSize?: number;
  /** Called once when the runner fails, with its status (failing event, error). */
  onFailure?(status: ProjectionStatus): void;
}

/** Longest stretch spent cutting a snapshot into parts before the event loop gets a turn. */
const SLICE_MS = 8;

/** Takes the parts of a generator, yielding to the event loop every SLICE_MS. */
async function cutInSlices(parts: Generator<string>): Promise<string[]> {
  const out: string[] = [];
  let start = performance.now();
  for (const part of parts) {
    out.push(part);
    if (performance.now() - start >= SLICE_MS) {
      await new Promise<void>((r) => setImmediate(r));
      start = performance.now();
    }
  }
  return out;
}

export class ProjectionRunner<State> {
  private readonly progress: Progress;
  private readonly everyEvents: number;
  private readonly everyMs: number;
  private current: State;
  private subscription: Subscription | undefined;
  private unsaved = 0;
  private lastSaveAt = Date.now();
  private saving: Promise<void> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | undefined;
  private ended: Promise<ProjectionStatus> | undefined;
  /** Set while a snapshot is being cut into parts: events wait for it. */
  private serializing: Promise<void> | undefined;
  private readonly partBytes: number;

  constructor(
    private readonly store: EventStore,
    private readonly projection: Projection<State>,
    private readonly snapshots: SnapshotStore,
    private readonly options: StateRunnerOptions = {},
  ) {
    checkProjectionIdentity(projection);
    this.progress = new Progress(projection.name, projection.version);
    this.everyEvents = options.snapshotEveryEvents ?? 50_000;
    this.everyMs = options.snapshotEveryMs ?? 1000;
    this.partBytes = options.snapshotPartBytes ?? DEFAULT_PART_BYTES;
    this.current = projection.initialState();
  }

  /** The current state (as of `status().position`). */
  get state(): State {
    return this.current;
  }

  status(): ProjectionStatus {
    return this.progress.snapshot();
  }

  /** Resolves when the runner has ended (stopped or failed), with its final status. */
  get done(): Promise<ProjectionStatus> {
    if (this.ended === undefined) throw new Error(`projection ${this.projection.name} was not started`);
    return this.ended;
  }

  async start(): Promise<void> {
    if (this.subscription !== undefined) throw new Error(`projection ${this.projection.name} is already running`);
    const p = this.projection;
    const s = this.progress.status;
    s.headAtStart = await this.store.headPosition();
    const cp = await this.snapshots.load(p.name);
    let from = 0;
    let reason: RebuildReason | undefined =
      cp === undefined ? 'no-checkpoint' : cp.version !== p.version ? 'version-changed' : undefined;
    if (reason === undefined && cp !== undefined) {
      try {
        if (cp.snapshot === undefined) throw new Error('no snapshot');
        this.current = p.fromSnapshot ? p.fromSnapshot(cp.snapshot) : (cp.snapshot as State);
        from = cp.position;
      } catch {
        reason = 'snapshot-unreadable';
        this.current = p.initialState();
      }
    }
    if (reason !== undefined) s.rebuiltBecause = reason;
    s.position = from;
    s.checkpointPosition = reason === undefined ? from : 0;
    s.phase = from >= s.headAtStart ? 'live' : 'rebuilding';
    const sub = this.store.subscribeAll({ afterPosition: from, batchSize: this.options.batchSize }, (e, info) =>
      this.onEvent(e, info.caughtUp),
    );
    this.subscription = sub;
    this.ended = sub.done.then((end) => this.finish(end));
  }

  private onEvent(e: StoredEvent, caughtUp: boolean): Promise<void> | undefined {
    // While a snapshot is cut into parts (between turns of the event loop) the state must not move: wait for it.
    if (this.serializing !== undefined) return this.serializing.then(() => this.onEvent(e, caughtUp));
    let next: State;
    try {
      next = this.projection.apply(this.current, e);
    } catch (error) {
      this.progress.status.failure = describeFailure(e, error);
      throw error;
    }
    this.current = next;
    this.progress.applied(e.position);
    this.unsaved++;
    if (caughtUp) this.progress.caughtUp();
    if (this.unsaved >= this.everyEvents || Date.now() - this.lastSaveAt >= this.everyMs) return this.saveSnapshot();
    if (caughtUp) this.scheduleIdleSave();
    return undefined;
  }

  private scheduleIdleSave(): void {
    if (this.idleTimer !== undefined) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.unsaved > 0) void this.saveSnapshot();
    }, this.everyMs);
    this.idleTimer.unref();
  }

  /**
   * Writes the snapshot of the current state now (serialized first, so later events cannot leak into it). With a
   * store that takes parts, the snapshot is cut into parts of about 1 MiB, a slice of at most SLICE_MS at a time
   * between turns of the event loop; no event is applied until the parts are cut.
   */
  saveSnapshot(): Promise<void> {
    if (this.serializing !== undefined) return this.serializing.then(() => this.saveSnapshot());
    const p = this.projection;
    const position = this.progress.status.position;
    const meta = { name: p.name, version: p.version, position };
    let write: () => Promise<void>;
    try {
      const value = p.toSnapshot ? p.toSnapshot(this.current) : (this.current as JsonValue);
      const saveParts = this.snapshots.saveParts?.bind(this.snapshots);
      if (saveParts !== undefined) {
        const cut = cutInSlices(snapshotParts(value, this.partBytes));
        this.serializing = cut.then(
          () => undefined,
          () => undefined,
        );
        void this.serializing.then(() => {
          this.serializing = undefined;
        });
        write = async () => saveParts(meta, await cut);
      } else {
        const snapshotJson = JSON.stringify(value);
        write = () => this.snapshots.save({ ...meta, snapshotJson });
      }
    } catch (e) {
      this.progress.status.snapshotError = describeError(e).message;
      return Promise.resolve();
    }
    this.unsaved = 0;
    this.lastSaveAt = Date.now();
    this.saving = this.saving.then(async () => {
      try {
        await write();
        this.progress.status.checkpointPosition = position;
        delete this.progress.status.snapshotError;
      } catch (e) {
        this.progress.status.snapshotError = describeError(e).message;
        this.unsaved = Math.max(this.unsaved, 1);
      }
    });
    return this.saving;
  }

  private async finish(end: SubscriptionEnd): Promise<ProjectionStatus> {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    if (this.unsaved > 0 || this.progress.status.checkpointPosition < this.progress.status.position)
      await this.saveSnapshot();
    await this.saving;
    this.progress.finish(end);
    if (end.reason === 'failed') this.options.onFailure?.(this.status());
    return this.status();
  }

  /** Resolves once every event up to `position` is applied; rejects with PR_PROJECTION_FAILED if it fails first. */
  waitForPosition(position: number, timeoutMs = 30_000): Promise<void> {
    return this.progress.waitFor(position, timeoutMs);
  }

  /** Resolves once the projection has applied everything stored when this was called. */
  async catchUp(timeoutMs = 30_000): Promise<void> {
    await this.waitForPosition(await this.store.headPosition(), timeoutMs);
  }

  /** Stops following the store and saves the snapshot; resolves with the final status. */
  async stop(): Promise<ProjectionStatus> {
    if (this.subscription === undefined) return this.status();
    await this.subscription.stop();
    return this.done;
  }
}
