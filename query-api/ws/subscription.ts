// One websocket's subscription to one request: replay of the request's stream up to where the live projection
// was when it began, then the current waiting status if it differs from what was said, then live messages
// (buffered while the replay is read). Positions and waiting keys make every message unique and ordered.
import type { StoredEvent } from '../../eventstore/port.js';
import { requestStream } from '../../domain/shared/ids.js';
import type { Cursor } from '../status/cursor.js';
import { eventDraft, waitingDraft, type Draft, type WaitingFacts } from '../status/messages.js';

/** Why a subscription ended: its request finished, the caller may not follow it, or its replay failed. */
export type EndReason = 'finished' | 'forbidden' | 'failed';

export interface SubscriptionSink {
  /** Sends a draft (in the order given). */
  send(d: Draft): void;
  ended(sub: RequestSubscription, reason: EndReason): void;
}

export class RequestSubscription {
  private replaying = true;
  private buffer: Draft[] = [];
  private lastPosition: number;
  private lastWaitingKey: string | null;
  done = false;
  modelKey: string | null = null;

  constructor(
    readonly requestId: string,
    since: Cursor | null,
    private readonly sink: SubscriptionSink,
    /** Whether the caller may follow a request of this submitter. */
    readonly admit: (submitter: string) => boolean,
  ) {
    this.lastPosition = since?.position ?? 0;
    this.lastWaitingKey = since?.waitingKey ?? null;
  }

  /**
   * Replays the stream's events up to `upTo` (the projection's position when the subscription was registered),
   * then `current` (the waiting status at `upTo`) if it is news, then what arrived meanwhile.
   */
  async replay(
    readStream: (streamId: string) => Promise<StoredEvent[]>,
    upTo: number,
    current: WaitingFacts | undefined,
    now: string,
  ): Promise<void> {
    const events = await readStream(requestStream(this.requestId));
    if (this.done) return;
    const drafts: Draft[] = [];
    for (const e of events) {
      if (e.position <= this.lastPosition || e.position > upTo) continue;
      const d = eventDraft(e, null, true);
      if (d !== undefined) drafts.push(d);
    }
    const lastKey = drafts.length > 0 ? drafts[drafts.length - 1]!.waitingKey : this.lastWaitingKey;
    if (current !== undefined) {
      const snap = waitingDraft({ position: upTo, metadata: { at: now } }, this.requestId, current, true, 'waiting');
      if (snap.waitingKey !== lastKey) {
        const last = drafts[drafts.length - 1];
        // The wait began at the projection's own position: that event's message says its true status.
        if (last !== undefined && last.position === upTo && last.waitingKey !== null)
          drafts[drafts.length - 1] = { ...snap, kind: 'event', msg: { ...last.msg, ...snap.msg, at: last.msg.at } };
        else drafts.push(snap);
      }
    }
    for (const d of drafts) {
      this.emit(d);
      if (this.done) return;
    }
    this.replaying = false;
    const buffered = this.buffer;
    this.buffer = [];
    for (const d of buffered) {
      this.emit(d);
      if (this.done) return;
    }
  }

  /** A message computed live (an event of this request, or a waiting status after another stream's event). */
  offer(d: Draft): void {
    if (this.done) return;
    if (this.replaying) this.buffer.push(d);
    else this.emit(d);
  }

  /** Whether a waiting status with this key, computed live, could be news. */
  wantsWaiting(key: string): boolean {
    return !this.done && (this.replaying || key !== this.lastWaitingKey);
  }

  private emit(d: Draft): void {
    if (
      d.kind === 'event'
        ? d.position <= this.lastPosition
        : d.position < this.lastPosition || d.waitingKey === this.lastWaitingKey
    )
      return;
    this.lastPosition = Math.max(this.lastPosition, d.position);
    this.lastWaitingKey = d.waitingKey;
    this.sink.send(d);
    if (d.terminal) this.end('finished');
  }

  end(reason: EndReason): void {
    if (this.done) return;
    this.done = true;
    this.buffer = [];
    this.sink.ended(this, reason);
  }
}
