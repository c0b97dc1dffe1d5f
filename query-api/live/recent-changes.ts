// The status page's "recent evictions and requeues": the latest events that took a replica off a GPU or sent a
// request back to the queue, kept as they are applied by the live view, and at start read back from the store
// (its audit query by type, the last day; a store without that index starts with what happens from then on).
import type { EventStore, StoredEvent } from '../../eventstore/port.js';
import type { ControlPlaneView } from '../../projections/control-plane/live.js';

export const CHANGE_KINDS: Record<string, 'requeue' | 'eviction' | 'demotion'> = {
  RequestRequeued: 'requeue',
  ReplicaEvictionRequested: 'eviction',
  ReplicaDemotionRequested: 'demotion',
};

export class RecentChanges {
  private events: StoredEvent[] = [];
  private seeded: Promise<void> | undefined;
  private readonly unlisten: () => void;

  constructor(
    view: ControlPlaneView,
    private readonly store: EventStore,
    private readonly clock: () => number,
    private readonly max = 20,
  ) {
    this.unlisten = view.onApplied((e) => {
      if (CHANGE_KINDS[e.type] !== undefined) this.add([e]);
    });
  }

  /** The latest changes, newest first. */
  async list(): Promise<StoredEvent[]> {
    this.seeded ??= this.seed();
    await this.seeded;
    return [...this.events].reverse();
  }

  close(): void {
    this.unlisten();
  }

  private add(events: StoredEvent[]): void {
    const byPosition = new Map(this.events.map((e) => [e.position, e]));
    for (const e of events) byPosition.set(e.position, e);
    this.events = [...byPosition.values()].sort((a, b) => a.position - b.position).slice(-this.max);
  }

  private async seed(): Promise<void> {
    const filters = this.store.capabilities.queryFilters;
    if (!filters.includes('type') || !filters.includes('fromAt')) return;
    const fromAt = new Date(this.clock() - 24 * 3600_000).toISOString();
    for (const type of Object.keys(CHANGE_KINDS)) {
      // Ascending with a limit: page to the end of the day's events, keeping the last few of each type.
      let afterPosition = 0;
      for (;;) {
        const page = await this.store.query({ type, fromAt, afterPosition, limit: 1000 });
        this.add(page.slice(-this.max));
        if (page.length < 1000) break;
        afterPosition = page[page.length - 1]!.position;
      }
    }
  }
}
