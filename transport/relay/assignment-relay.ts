// Store → transport: follows the event store from a checkpoint and publishes every assignment (routing.ts) to
// the assignments topic, keyed by agent id, in log order. At least once: the checkpoint (position + the routing
// state, one row, written atomically by the SnapshotStore) is saved only after the messages up to that position
// were accepted by the transport, so a crash republishes what came after the checkpoint; agents drop a position
// they have seen. A failure (transport or store) restarts the relay from its last checkpoint after a delay. A run
// takes its payload from the RequestReceived the relay saw (received-cache.ts), else from the request's stream.
import type { Logger } from 'pino';
import type { BlobStore } from '../../blobstore/port.js';
import type { EventStore, StoredEvent, Subscription } from '../../eventstore/port.js';
import { requestStream } from '../../domain/shared/ids.js';
import type { SnapshotStore } from '../../projections/runner/projection.js';
import { encodeJson } from '../json.js';
import type { OutgoingMessage, Transport } from '../port.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../validate.js';
import { ReceivedCache, type ReceivedFacts } from './received-cache.js';
import { initialRelayState, route, type Draft, type RelayState } from './routing.js';
import { agentAssignmentsTopic, DEFAULT_TOPICS, WIRE_VERSION, type Assignment } from './wire.js';

export const RELAY_CHECKPOINT = { name: 'relay-assignments', version: 1 } as const;

export interface AssignmentRelayOptions {
  store: EventStore;
  snapshots: SnapshotStore;
  transport: Transport;
  /** Where a payload too large for one transport message goes (the agent reads it from there). */
  blobs: BlobStore;
  log: Logger;
  topic?: string;
  /** Least time between two checkpoint writes while events flow. Default 1000 ms. */
  checkpointEveryMs?: number;
  /** Messages collected before a publish while catching up. Default 500. */
  publishBatch?: number;
  /** Wait before restarting after a failure. Default 1000 ms. */
  restartDelayMs?: number;
}

export interface AssignmentRelayStatus {
  phase: 'stopped' | 'running' | 'restarting';
  /** Last event whose assignments the transport accepted. */
  position: number;
  checkpointPosition: number;
  published: number;
  restarts: number;
  lastError?: string;
}

/** Payloads whose run message would exceed this go to the blob store. */
const INLINE_LIMIT = DEFAULT_MAX_MESSAGE_BYTES - 64 * 1024;

export class AssignmentRelay {
  private readonly topic: string;
  private state: RelayState = initialRelayState();
  private subscription: Subscription | undefined;
  private outbox: Array<OutgoingMessage & { topic: string }> = [];
  /** Payloads of requests seen arriving, so their dispatch reads nothing (received-cache.ts). */
  private received = new ReceivedCache();
  private position = 0;
  /** The last position whose messages are published, and its routing state serialized when a checkpoint needs it. */
  private flushed: { position: number; snapshot: string | undefined } = { position: 0, snapshot: '' };
  /** An event is being routed (its state changes are in, its position not yet). */
  private routing = false;
  private lastSaveAt = 0;
  private saving: Promise<void> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private waiters: Array<{ position: number; resolve: () => void }> = [];
  private stopped = true;
  private readonly st: AssignmentRelayStatus = {
    phase: 'stopped',
    position: 0,
    checkpointPosition: 0,
    published: 0,
    restarts: 0,
  };

  constructor(private readonly options: AssignmentRelayOptions) {
    this.topic = options.topic ?? DEFAULT_TOPICS.assignments;
  }

  status(): AssignmentRelayStatus {
    return { ...this.st };
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.run();
  }

  private async run(): Promise<void> {
    const cp = await this.options.snapshots.load(RELAY_CHECKPOINT.name);
    const usable = cp !== undefined && cp.version === RELAY_CHECKPOINT.version && cp.snapshot !== undefined;
    this.state = usable ? (cp.snapshot as unknown as RelayState) : initialRelayState();
    this.received = new ReceivedCache();
    this.position = usable ? cp.position : 0;
    this.flushed = { position: this.position, snapshot: JSON.stringify(this.state) };
    this.st.position = this.st.checkpointPosition = this.position;
    this.outbox = [];
    this.st.phase = 'running';
    const sub = this.options.store.subscribeAll({ afterPosition: this.position, batchSize: 1000 }, (e, info) =>
      this.onEvent(e, info.caughtUp),
    );
    this.subscription = sub;
    void sub.done.then((end) => {
      if (end.reason !== 'failed' || this.stopped) return;
      this.st.lastError = end.error instanceof Error ? end.error.message : String(end.error);
      this.st.phase = 'restarting';
      this.st.restarts++;
      this.options.log.error(
        { err: end.error, position: end.lastPosition },
        'assignment relay failed; restarting from its checkpoint',
      );
      this.restartTimer = setTimeout(() => {
        this.restartTimer = undefined;
        if (!this.stopped)
          this.run().catch((e: unknown) => this.options.log.error({ err: e }, 'assignment relay could not restart'));
      }, this.options.restartDelayMs ?? 1000);
    });
  }

  private async onEvent(e: StoredEvent, caughtUp: boolean): Promise<void> {
    this.received.observe(e);
    this.routing = true;
    const drafts = route(this.state, e);
    for (const d of drafts) this.outbox.push(await this.message(d, e));
    this.position = e.position;
    this.routing = false;
    if (
      caughtUp ||
      this.outbox.length >= (this.options.publishBatch ?? 500) ||
      e.position - this.flushed.position >= 5000
    )
      await this.flush();
  }

  private async message(d: Draft, e: StoredEvent): Promise<OutgoingMessage & { topic: string }> {
    const m = await this.payload(d, e);
    return { ...m, topic: agentAssignmentsTopic(this.topic, d.agentId) };
  }

  private async payload(d: Draft, e: StoredEvent): Promise<OutgoingMessage> {
    const base = {
      v: WIRE_VERSION,
      position: e.position,
      eventId: e.id,
      correlationId: e.metadata.correlationId,
    } as const;
    let a: Assignment;
    if (d.kind === 'run') {
      const r =
        this.received.take(d.requestId) ??
        (((await this.options.store.readStream(requestStream(d.requestId), { limit: 1 }))[0]?.data ??
          {}) as ReceivedFacts);
      a = {
        ...base,
        ...d,
        trusted: r.trusted === true,
        options: { timeoutMs: r.options?.timeoutMs ?? null, steps: r.options?.steps ?? 1 },
        payload: r.payload ?? null,
      };
      const value = encodeJson(a);
      if (value.byteLength > INLINE_LIMIT) {
        const blob = await this.options.blobs.put(encodeJson(r.payload ?? null), { contentType: 'application/json' });
        a = { ...a, payload: undefined, payloadBlob: { ref: blob.ref, size: blob.size, sha256: blob.sha256 } };
      } else {
        return { key: d.agentId, value };
      }
    } else {
      a = { ...base, ...d } as Assignment;
    }
    return { key: d.agentId, value: encodeJson(a) };
  }

  private async flush(): Promise<void> {
    if (this.outbox.length > 0) {
      const batch = this.outbox;
      this.outbox = [];
      // One publish per agent topic, all at once (the transport sends them together); order per agent is kept.
      const byTopic = new Map<string, OutgoingMessage[]>();
      for (const { topic, ...m } of batch) {
        const list = byTopic.get(topic);
        if (list === undefined) byTopic.set(topic, [m]);
        else list.push(m);
      }
      await Promise.all([...byTopic].map(([topic, ms]) => this.options.transport.publish(topic, ms)));
      this.st.published += batch.length;
    }
    // The routing state is serialized only for a checkpoint (at most every checkpointEveryMs), not on every flush:
    // at 1,000 agents it is large, and a flush happens per event when live.
    this.flushed = { position: this.position, snapshot: undefined };
    this.st.position = this.position;
    this.wake();
    const every = this.options.checkpointEveryMs ?? 1000;
    if (Date.now() - this.lastSaveAt >= every) await this.save();
    else this.scheduleIdleSave(every);
  }

  private scheduleIdleSave(every: number): void {
    if (this.idleTimer !== undefined) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      void this.save();
    }, every);
    this.idleTimer.unref();
  }

  /** Writes the checkpoint of the last flushed position (never one whose messages are not yet published). */
  private save(): Promise<void> {
    const { position } = this.flushed;
    if (position <= this.st.checkpointPosition) return this.saving;
    // The state may be serialized only while it is the state of the flushed position (nothing routed since).
    if (this.flushed.snapshot === undefined) {
      if (this.routing || this.position !== position || this.outbox.length > 0) {
        if (!this.stopped) this.scheduleIdleSave(this.options.checkpointEveryMs ?? 1000);
        return this.saving;
      }
      this.flushed.snapshot = JSON.stringify(this.state);
    }
    const snapshot = this.flushed.snapshot;
    this.lastSaveAt = Date.now();
    this.saving = this.saving.then(async () => {
      try {
        await this.options.snapshots.save({ ...RELAY_CHECKPOINT, position, snapshotJson: snapshot });
        this.st.checkpointPosition = Math.max(this.st.checkpointPosition, position);
      } catch (err) {
        this.options.log.warn({ err }, 'assignment relay checkpoint not saved; it is tried again');
      }
    });
    return this.saving;
  }

  private wake(): void {
    const ready = this.waiters.filter((w) => w.position <= this.st.position);
    this.waiters = this.waiters.filter((w) => w.position > this.st.position);
    for (const w of ready) w.resolve();
  }

  /** Resolves once the assignments of every event up to `position` are published. */
  waitForPosition(position: number, timeoutMs = 30_000): Promise<void> {
    if (this.st.position >= position) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `relay did not publish up to position ${position} within ${timeoutMs} ms (at ${this.st.position})`,
            ),
          ),
        timeoutMs,
      );
      this.waiters.push({
        position,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    await this.subscription?.stop();
    await this.save();
    this.st.phase = 'stopped';
  }
}
