// Reading the log for forensics: pages of the global log up to a position, and events found by id. The store has
// no lookup by event id, so an event a causation id names is found where the convention puts it (docs/events.md):
// among the events of the same correlation (a scheduler decision carries the correlation id of the event it
// reacts to), else in the stream of the event that names it (an agent report names its assignment).
import type { EventStore, StoredEvent } from '../eventstore/port.js';

const PAGE = 5000;

/** Calls `onPage` with the events after `afterPosition` up to and including `toPosition`, in pages, in order. */
export async function forEachPage(
  store: EventStore,
  range: { afterPosition?: number; toPosition: number },
  onPage: (events: StoredEvent[]) => void | Promise<void>,
): Promise<void> {
  let after = range.afterPosition ?? 0;
  while (after < range.toPosition) {
    const page = await store.readAll({ afterPosition: after, limit: PAGE });
    if (page.length === 0) return;
    const inRange =
      page[page.length - 1].position <= range.toPosition ? page : page.filter((e) => e.position <= range.toPosition);
    if (inRange.length > 0) await onPage(inRange);
    if (inRange.length < page.length) return;
    after = page[page.length - 1].position;
  }
}

/** Every event matching an indexed query (paged through, at most `max`). */
export async function queryAll(
  store: EventStore,
  filter: Parameters<EventStore['query']>[0],
  max = 10_000,
): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  let after = 0;
  while (out.length < max) {
    const want = Math.min(1000, max - out.length);
    const page = await store.query({ ...filter, afterPosition: after, limit: want });
    out.push(...page);
    if (page.length < want) break;
    after = page[page.length - 1].position;
  }
  return out;
}

/** Events seen so far, by id, and the lookups that find more. */
export class EventLookup {
  private readonly byId = new Map<string, StoredEvent>();
  private readonly loadedCorrelations = new Set<string>();
  private readonly loadedStreams = new Map<string, StoredEvent[]>();

  constructor(private readonly store: EventStore) {}

  add(events: Iterable<StoredEvent>): void {
    for (const e of events) this.byId.set(e.id, e);
  }

  async stream(streamId: string): Promise<StoredEvent[]> {
    let events = this.loadedStreams.get(streamId);
    if (events === undefined) {
      events = await this.store.readStream(streamId);
      this.loadedStreams.set(streamId, events);
      this.add(events);
    }
    return events;
  }

  /** The event with this id, looked for in the correlation given, then in the stream given; undefined when neither holds it. */
  async find(id: string, near: { correlationId: string; streamId: string }): Promise<StoredEvent | undefined> {
    const known = this.byId.get(id);
    if (known !== undefined) return known;
    if (
      !this.loadedCorrelations.has(near.correlationId) &&
      this.store.capabilities.queryFilters.includes('correlationId')
    ) {
      this.loadedCorrelations.add(near.correlationId);
      this.add(await queryAll(this.store, { correlationId: near.correlationId }));
      const found = this.byId.get(id);
      if (found !== undefined) return found;
    }
    await this.stream(near.streamId);
    return this.byId.get(id);
  }

  /** Events whose causation id is this event's id (what it caused), at most `max`. */
  async effectsOf(e: StoredEvent, max: number): Promise<StoredEvent[]> {
    if (!this.store.capabilities.queryFilters.includes('causationId')) return [];
    const out = await this.store.query({ causationId: e.id, limit: max });
    this.add(out);
    return out;
  }
}
