// Runs a read-model projection: its rows for a batch of events and its checkpoint commit in one transaction, so a
// crash anywhere leaves both at the same position and a restart applies each event exactly once. A batch is
// committed when it is full, when the runner has caught up with the store, or when it has been open too long.
// Live, a runner may linger before each commit (`liveBatchMs`), unless someone waits for a position. When a batch
// fails (a handler throws or the commit is refused) the runner replays it one event per transaction, committing the
// events before the culprit, and stops at the culprit with its error: it never skips an event.
import type { EventStore, StoredEvent, Subscription, SubscriptionEnd } from '../../eventstore/port.js';
import { Progress } from './progress.js';
import {
  checkProjectionIdentity,
  describeError,
  describeFailure,
  type ProjectionStatus,
  type ReadModelProjection,
  type ReadModelTarget,
} from './projection.js';

export interface ReadModelRunnerOptions {
  /** Events per transaction at most. Default 500. */
  batchSize?: number;
  /** Commit a batch that has been open this long even if more events are coming. Default 200 ms. */
  maxBatchMs?: number;
  /**
   * Once caught up with the store, wait this long before committing (the subscription reads on after it): live, at
   * most one commit per `liveBatchMs`, holding the events appended meanwhile, instead of one per event. A wait for a
   * position (`waitForPosition`, `catchUp`) ends the wait. Default 0: commit as soon as caught up.
   */
  liveBatchMs?: number;
  /** Called once when the runner fails, with its status (failing event, error). */
  onFailure?(status: ProjectionStatus): void;
}

export class ReadModelRunner<Tx> {
  private readonly progress: Progress;
  private readonly batchSize: number;
  private readonly maxBatchMs: number;
  private readonly liveBatchMs: number;
  /** Ends the current linger early (a position is awaited, or the runner stops). */
  private endLinger: (() => void) | undefined;
  private buffer: StoredEvent[] = [];
  private batchStartedAt = 0;
  private subscription: Subscription | undefined;
  private ended: Promise<ProjectionStatus> | undefined;

  constructor(
    private readonly store: EventStore,
    private readonly projection: ReadModelProjection<Tx>,
    private readonly target: ReadModelTarget<Tx>,
    private readonly options: ReadModelRunnerOptions = {},
  ) {
    checkProjectionIdentity(projection);
    this.progress = new Progress(projection.name, projection.version);
    this.batchSize = options.batchSize ?? 500;
    this.maxBatchMs = options.maxBatchMs ?? 200;
    this.liveBatchMs = options.liveBatchMs ?? 0;
  }

  status(): ProjectionStatus {
    return this.progress.snapshot();
  }

  get done(): Promise<ProjectionStatus> {
    if (this.ended === undefined) throw new Error(`projection ${this.projection.name} was not started`);
    return this.ended;
  }

  async start(): Promise<void> {
    if (this.subscription !== undefined) throw new Error(`projection ${this.projection.name} is already running`);
    const p = this.projection;
    const s = this.progress.status;
    s.headAtStart = await this.store.headPosition();
    const from = await this.target.transaction(async (tx) => {
      await p.setup(tx);
      const cp = await this.target.loadCheckpoint(tx, p.name);
      if (cp !== undefined && cp.version === p.version) return cp.position;
      s.rebuiltBecause = cp === undefined ? 'no-checkpoint' : 'version-changed';
      await p.reset(tx);
      await this.target.saveCheckpoint(tx, { name: p.name, version: p.version, position: 0, snapshotJson: null });
      return 0;
    });
    s.position = from;
    s.checkpointPosition = from;
    s.phase = from >= s.headAtStart ? 'live' : 'rebuilding';
    const sub = this.store.subscribeAll({ afterPosition: from, batchSize: Math.max(this.batchSize, 100) }, (e, info) =>
      this.onEvent(e, info.caughtUp),
    );
    this.subscription = sub;
    this.ended = sub.done.then((end) => this.finish(end));
  }

  private onEvent(e: StoredEvent, caughtUp: boolean): Promise<void> | undefined {
    if (this.buffer.length === 0) this.batchStartedAt = Date.now();
    this.buffer.push(e);
    if (this.buffer.length >= this.batchSize || caughtUp || Date.now() - this.batchStartedAt >= this.maxBatchMs) {
      const flushed = () =>
        this.flush().then(() => {
          if (caughtUp) this.progress.caughtUp();
        });
      if (caughtUp && this.liveBatchMs > 0 && this.buffer.length < this.batchSize && !this.progress.awaited)
        return this.linger().then(flushed);
      return flushed();
    }
    return undefined;
  }

  /** Sleeps up to liveBatchMs (the subscription reads no further meanwhile), less when a position is awaited. */
  private linger(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.endLinger = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.liveBatchMs);
      this.endLinger = done;
    });
  }

  private commit(events: readonly StoredEvent[]): Promise<void> {
    const p = this.projection;
    return this.target.transaction(async (tx) => {
      for (const e of events) {
        try {
          await p.handle(e, tx);
        } catch (error) {
          throw new EventFailure(e, error);
        }
      }
      await this.target.saveCheckpoint(tx, {
        name: p.name,
        version: p.version,
        position: events[events.length - 1].position,
        snapshotJson: null,
      });
    });
  }

  private committed(events: readonly StoredEvent[]): void {
    for (const e of events) this.progress.applied(e.position);
    this.progress.status.checkpointPosition = events[events.length - 1].position;
  }

  private async flush(): Promise<void> {
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length === 0) return;
    try {
      await this.commit(batch);
      this.committed(batch);
      return;
    } catch (error) {
      if (batch.length === 1) return this.fail(batch[0], error);
    }
    for (const e of batch) {
      try {
        await this.commit([e]);
      } catch (error) {
        return this.fail(e, error);
      }
      this.committed([e]);
    }
  }

  private fail(e: StoredEvent, error: unknown): never {
    const cause = error instanceof EventFailure ? error.error : error;
    this.progress.status.failure = describeFailure(error instanceof EventFailure ? error.event : e, cause);
    throw cause;
  }

  private async finish(end: SubscriptionEnd): Promise<ProjectionStatus> {
    if (end.reason === 'stopped') {
      try {
        await this.flush();
      } catch (error) {
        end = { reason: 'failed', lastPosition: end.lastPosition, error, event: undefined };
      }
    }
    this.buffer = [];
    this.progress.finish(end);
    if (end.reason === 'failed') this.options.onFailure?.(this.status());
    return this.status();
  }

  /** Resolves once the rows of every event up to `position` are committed; rejects if the runner fails first. */
  waitForPosition(position: number, timeoutMs = 30_000): Promise<void> {
    const reached = this.progress.waitFor(position, timeoutMs);
    this.endLinger?.();
    return reached;
  }

  async catchUp(timeoutMs = 30_000): Promise<void> {
    await this.waitForPosition(await this.store.headPosition(), timeoutMs);
  }

  /** Commits what is buffered, stops following the store; resolves with the final status. */
  async stop(): Promise<ProjectionStatus> {
    if (this.subscription === undefined) return this.status();
    const stopping = this.subscription.stop();
    this.endLinger?.();
    await stopping;
    return this.done;
  }
}

/** A handler error, tagged with the event it was handling. */
class EventFailure extends Error {
  constructor(
    readonly event: StoredEvent,
    readonly error: unknown,
  ) {
    super(describeError(error).message);
  }
}
