// Catch-up-then-live subscription over any store that can read pages of the global log and signal appends.
// One loop per subscription: read a page after the cursor, hand each event to the handler (awaiting it only
// when it returns a promise: backpressure without a promise per event), move the cursor; when a page is empty,
// sleep until an append signal or the poll timer. The next page is read before the current page's last event is
// delivered, so `caughtUp` is exact. Synchronous handlers run back to back for at most SLICE_MS, then the loop lets
// the event loop turn (a burst of large events must not hold up the process's HTTP answers for half a second).
import { performance } from 'node:perf_hooks';
import type { DeliveryInfo, StoredEvent, Subscription, SubscriptionEnd, SubscriptionHandler } from './port.js';

export interface PageSource {
  readPage(afterPosition: number, limit: number): Promise<StoredEvent[]>;
  /** Registers a listener called when new events may be visible; returns a function that unregisters it. */
  onAppend(listener: () => void): () => void;
  /** Upper bound on how long the loop sleeps without a signal (the fallback for appends in other processes). */
  pollIntervalMs: number;
}

/** Longest stretch of synchronous delivery before the loop yields to other work. */
export const SLICE_MS = 8;

// The process's subscriptions take turns: a yielding one waits behind the others, and each turn of the event loop
// resumes one of them. Resumed together in one check phase, N subscriptions would run their slices back to back and
// hold the process's HTTP answers for the sum of them.
const waitingForTurn: Array<() => void> = [];
let turnScheduled = false;
function nextTurn(): void {
  turnScheduled = false;
  waitingForTurn.shift()?.();
  if (waitingForTurn.length > 0) scheduleTurn();
}
function scheduleTurn(): void {
  if (turnScheduled) return;
  turnScheduled = true;
  setImmediate(nextTurn);
}
const yieldToEventLoop = (): Promise<void> =>
  new Promise((resolve) => {
    waitingForTurn.push(resolve);
    scheduleTurn();
  });

export function startSubscription(
  source: PageSource,
  afterPosition: number,
  batchSize: number,
  handler: SubscriptionHandler,
  onEnd: (s: Subscription) => void,
): Subscription {
  let stopped = false;
  let signalled = false;
  let wake: (() => void) | undefined;
  let lastPosition = afterPosition;
  let current: StoredEvent | undefined;

  const unlisten = source.onAppend(() => {
    signalled = true;
    wake?.();
  });

  const sleep = (): Promise<void> =>
    new Promise<void>((resolve) => {
      if (signalled || stopped) return resolve();
      const timer = setTimeout(done, source.pollIntervalMs);
      function done(): void {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  // Pages shrink while reading one takes long (a page of 1000 events of 40 KB each is 40 MB of JSON to parse in
  // one go) and grow back to batchSize when reads are quick.
  let limit = batchSize;
  const read = async (after: number): Promise<StoredEvent[]> => {
    signalled = false;
    const t = performance.now();
    const page = await source.readPage(after, limit);
    const ms = performance.now() - t;
    if (ms > SLICE_MS / 2 && limit > 16) limit = Math.max(16, limit >> 1);
    else if (ms < SLICE_MS / 8 && limit < batchSize) limit = Math.min(batchSize, limit * 2);
    return page;
  };

  // Shared delivery infos: handlers only read them (frozen, so one that tries to keep or change one fails loudly).
  const behind: DeliveryInfo = Object.freeze({ caughtUp: false });
  const atHead: DeliveryInfo = Object.freeze({ caughtUp: true });

  let sliceStart = performance.now();

  const loop = async (): Promise<SubscriptionEnd> => {
    try {
      let page = await read(lastPosition);
      while (!stopped) {
        if (page.length === 0) {
          await sleep();
          if (stopped) break;
          page = await read(lastPosition);
          continue;
        }
        const lastIndex = page.length - 1;
        const next = read(page[lastIndex].position);
        // A rejected prefetch is awaited below; mark it handled so an early stop leaves no unhandled rejection.
        next.catch(() => undefined);
        for (let i = 0; i < lastIndex && !stopped; i++) {
          const e = page[i];
          current = e;
          const r = handler(e, behind);
          if (r !== undefined && typeof (r as Promise<void>).then === 'function') await r;
          lastPosition = e.position;
          if (performance.now() - sliceStart > SLICE_MS) {
            await yieldToEventLoop();
            sliceStart = performance.now();
          }
        }
        current = undefined;
        if (stopped) break;
        const following = await next;
        if (stopped) break;
        const e = page[lastIndex];
        current = e;
        const r = handler(e, following.length === 0 ? atHead : behind);
        if (r !== undefined && typeof (r as Promise<void>).then === 'function') await r;
        lastPosition = e.position;
        current = undefined;
        sliceStart = performance.now();
        page = following;
      }
      return { reason: 'stopped', lastPosition };
    } catch (error) {
      return { reason: 'failed', lastPosition, error, event: current };
    } finally {
      unlisten();
    }
  };

  const done = loop();
  const subscription: Subscription = {
    async stop() {
      stopped = true;
      wake?.();
      await done;
    },
    done,
    get lastPosition() {
      return lastPosition;
    },
  };
  void done.then(() => onEnd(subscription));
  return subscription;
}

/** In-process append signal shared by the subscriptions of one store instance. */
export class AppendSignal {
  private readonly listeners = new Set<() => void>();

  listen(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(): void {
    for (const l of this.listeners) l();
  }
}
