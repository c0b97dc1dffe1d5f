// The event store's append latency: the store a process uses, with `append` timed into
// ndif_event_store_append_seconds{store} and every other call passed through untouched.
import { Histogram, type Registry } from 'prom-client';
import type { EventStore } from '../eventstore/port.js';
import { SECONDS_BUCKETS } from './registry.js';

export function timedEventStore(store: EventStore, registry: Registry, kind: string): EventStore {
  const seconds = new Histogram({
    name: 'ndif_event_store_append_seconds',
    help: 'Time of one append to the event store (a command decision, an agent report), by store and outcome',
    labelNames: ['store', 'outcome'],
    buckets: SECONDS_BUCKETS,
    registers: [registry],
  });
  const append: EventStore['append'] = async (streamId, events, options) => {
    const end = seconds.startTimer({ store: kind });
    try {
      const r = await store.append(streamId, events, options);
      end({ outcome: 'ok' });
      return r;
    } catch (e) {
      end({ outcome: 'error' });
      throw e;
    }
  };
  // Methods are bound once, not on every call: the store is on every request's hot path.
  const bound = new Map<PropertyKey, unknown>([['append', append]]);
  return new Proxy(store, {
    get(target, prop) {
      const hit = bound.get(prop);
      if (hit !== undefined) return hit;
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof v !== 'function') return v;
      const f = (v as (...a: unknown[]) => unknown).bind(target);
      bound.set(prop, f);
      return f;
    },
  });
}
