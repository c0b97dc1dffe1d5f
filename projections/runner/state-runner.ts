// Runs a state projection: restores its snapshot (or rebuilds from position 0 when there is none, the version
// changed, or the snapshot is unreadable), then follows the store live. Snapshot and checkpoint position are one
// row, written every N events or T ms of activity, when it catches up and stays idle, and on stop. An apply that
// throws stops the runner at that event: the state stays as of the event before, and that is what is saved.
import type { EventStore, StoredEvent, Subscription, SubscriptionEnd } from '../../eventstore/port.js';
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
  /** Events read per page while catching up. Default 1000. */
  batchSize?: number;
  /** Called once when the runner fails, with its status (failing event, error). */
  onFailure?(status: ProjectionStatus): void;
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

  /** Writes the snapshot of the current state now (serialized first, so later events cannot leak into it). */
  saveSnapshot(): Promise<void> {
    const p = this.projection;
    const position = this.progress.status.position;
    let snapshotJson: string;
    try {
      snapshotJson = JSON.stringify(p.toSnapshot ? p.toSnapshot(this.current) : this.current);
    } catch (e) {
      this.progress.status.snapshotError = describeError(e).message;
      return Promise.resolve();
    }
    this.unsaved = 0;
    this.lastSaveAt = Date.now();
    this.saving = this.saving.then(async () => {
      try {
        await this.snapshots.save({ name: p.name, version: p.version, position, snapshotJson });
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
