// The status hub: one listener on the live projection fans each applied event out to the subscriptions it
// concerns — the request's own (its event's message) and those of other waiting requests of the same model
// (their status or position may have moved) — and tells cluster watchers that something changed.
import type { StoredEvent } from '../../eventstore/port.js';
import type { ControlPlaneState } from '../../projections/control-plane/state.js';
import { affectedBy } from '../../projections/control-plane/status.js';
import type { ControlPlaneView } from '../../projections/control-plane/live.js';
import type { Cursor } from '../status/cursor.js';
import { waitingKeyOf } from '../status/cursor.js';
import { eventDraft, waitingDraft, waitingFacts, type Draft } from '../status/messages.js';
import { runningBySubmitter } from '../../projections/control-plane/positions.js';
import { RequestSubscription, type SubscriptionSink } from './subscription.js';
import { requestStream } from '../../domain/shared/ids.js';
import { requestViewFromEvents } from '../../projections/requests/from-events.js';

export interface HubWatcher {
  changed(position: number): void;
}

const WATCH_INTERVAL_MS = 250;
const TERMINAL = new Set(['COMPLETED', 'ERROR', 'CANCELLED']);

export class StatusHub {
  private readonly byRequest = new Map<string, Set<RequestSubscription>>();
  private readonly byModel = new Map<string, Set<RequestSubscription>>();
  private readonly watchers = new Set<HubWatcher>();
  private watchTimer: NodeJS.Timeout | undefined;
  private watchPosition = 0;
  private readonly unlisten: () => void;

  constructor(
    private readonly view: ControlPlaneView,
    private readonly readStream: (streamId: string) => Promise<StoredEvent[]>,
    private readonly onError: (e: unknown, where: string) => void,
    private readonly clock: () => number,
  ) {
    this.unlisten = view.onApplied((e, s) => {
      try {
        this.onEvent(e, s);
      } catch (err) {
        this.onError(err, `status hub at position ${e.position}`);
      }
    });
  }

  /** Subscriptions held now. */
  get size(): number {
    let n = 0;
    for (const s of this.byRequest.values()) n += s.size;
    return n;
  }

  /**
   * Registers a subscription at the projection's current position and starts its replay; undefined when the
   * request exists and `admit` refuses its submitter (a request that appears later is checked then).
   */
  subscribe(
    requestId: string,
    since: Cursor | null,
    sink: SubscriptionSink,
    admit: (submitter: string) => boolean,
  ): RequestSubscription | undefined {
    const s = this.view.state;
    const upTo = s.position;
    const known = s.requests.byId.get(requestId);
    if (known !== undefined && !admit(known.submitter)) return undefined;
    const sub = new RequestSubscription(
      requestId,
      since,
      {
        send: (d) => sink.send(d),
        ended: (x, reason) => {
          this.remove(x);
          sink.ended(x, reason);
        },
      },
      admit,
    );
    let set = this.byRequest.get(requestId);
    if (set === undefined) {
      set = new Set();
      this.byRequest.set(requestId, set);
    }
    set.add(sub);
    if (known !== undefined) this.index(sub, known.modelKey);
    const current = waitingFacts(s, requestId);
    let finishedAtStart = known !== undefined && TERMINAL.has(known.status);
    const now = new Date(this.clock()).toISOString();
    const start = async () => {
      if (known !== undefined) return sub.replay(this.readStream, upTo, current, now);
      // Not in the view: not received yet, or finished and evicted (bounded hot state) — then its stream says so.
      const events = await this.readStream(requestStream(requestId));
      const v = requestViewFromEvents(
        requestId,
        events.filter((e) => e.position <= upTo),
      );
      if (v !== undefined && !admit(v.submitter)) return sub.end('forbidden');
      finishedAtStart = v !== undefined && TERMINAL.has(v.status);
      return sub.replay(async () => events, upTo, current, now);
    };
    start()
      .then(() => {
        // Resubscribed past the end of a finished request: nothing more will come.
        if (finishedAtStart && !sub.done) sub.end('finished');
      })
      .catch((e) => {
        this.onError(e, `replay of request ${requestId}`);
        sub.end('failed');
      });
    return sub;
  }

  /** Removes a subscription (the client unsubscribed or went away). */
  drop(sub: RequestSubscription): void {
    sub.done = true;
    this.remove(sub);
  }

  watch(w: HubWatcher): () => void {
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  close(): void {
    this.unlisten();
    clearTimeout(this.watchTimer);
    for (const set of this.byRequest.values()) for (const sub of set) sub.done = true;
    this.byRequest.clear();
    this.byModel.clear();
    this.watchers.clear();
  }

  private index(sub: RequestSubscription, modelKey: string): void {
    sub.modelKey = modelKey;
    let set = this.byModel.get(modelKey);
    if (set === undefined) {
      set = new Set();
      this.byModel.set(modelKey, set);
    }
    set.add(sub);
  }

  private remove(sub: RequestSubscription): void {
    const set = this.byRequest.get(sub.requestId);
    set?.delete(sub);
    if (set?.size === 0) this.byRequest.delete(sub.requestId);
    if (sub.modelKey !== null) {
      const m = this.byModel.get(sub.modelKey);
      m?.delete(sub);
      if (m?.size === 0) this.byModel.delete(sub.modelKey);
    }
  }

  private onEvent(e: StoredEvent, s: ControlPlaneState): void {
    if (this.watchers.size > 0) this.scheduleWatch(e.position);
    if (this.byRequest.size === 0) return;
    const a = affectedBy(e, s);
    if (a.requestId !== null) {
      const subs = this.byRequest.get(a.requestId);
      if (subs !== undefined) {
        let d: Draft | undefined | null = null;
        for (const sub of [...subs]) {
          if (sub.modelKey === null) {
            const v = s.requests.byId.get(a.requestId);
            if (v !== undefined) {
              if (!sub.admit(v.submitter)) {
                sub.end('forbidden');
                continue;
              }
              this.index(sub, v.modelKey);
            }
          }
          if (d === null) d = eventDraft(e, s, false);
          if (d !== undefined) sub.offer(d);
        }
      }
    }
    if (a.modelKey !== null) {
      const subs = this.byModel.get(a.modelKey);
      if (subs === undefined) return;
      let running: Map<string, number> | undefined;
      for (const sub of [...subs]) {
        if (sub.requestId === a.requestId) continue;
        running ??= runningBySubmitter(s.requests);
        const w = waitingFacts(s, sub.requestId, running);
        if (w === undefined || !sub.wantsWaiting(waitingKeyOf(w.status, w.position))) continue;
        sub.offer(waitingDraft(e, sub.requestId, w, false, 'waiting'));
      }
    }
  }

  private scheduleWatch(position: number): void {
    this.watchPosition = position;
    if (this.watchTimer !== undefined) return;
    this.watchTimer = setTimeout(() => {
      this.watchTimer = undefined;
      for (const w of this.watchers) w.changed(this.watchPosition);
    }, WATCH_INTERVAL_MS);
    this.watchTimer.unref();
  }
}
