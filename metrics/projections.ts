// How far each projection of this process trails the event store: ndif_projection_lag_events{projection} =
// the store's head position − the position the projection has applied, read at scrape time, and the head itself.
import { Gauge, type Registry } from 'prom-client';
import type { EventStore } from '../eventstore/port.js';

/** Each projection's name and applied position now. */
export type ProjectionSource = () => { name: string; position: number }[];

export class ProjectionLag {
  private readonly sources: ProjectionSource[] = [];

  constructor(registry: Registry, store: EventStore) {
    const sources = this.sources;
    new Gauge({
      name: 'ndif_event_store_head_position',
      help: 'Position of the last event in the event store',
      registers: [registry],
      async collect() {
        this.set(await store.headPosition());
      },
    });
    new Gauge({
      name: 'ndif_projection_lag_events',
      help: 'Events in the store a projection has not applied yet (log position − its position)',
      labelNames: ['projection'],
      registers: [registry],
      async collect() {
        const h = await store.headPosition();
        this.reset();
        for (const source of sources)
          for (const p of source()) this.set({ projection: p.name }, Math.max(0, h - p.position));
      },
    });
  }

  add(source: ProjectionSource): void {
    this.sources.push(source);
  }
}
