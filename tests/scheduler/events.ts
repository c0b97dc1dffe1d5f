// Reading the log in scheduler tests.
import type { StoredEvent } from '../../eventstore/port.js';
import type { Harness } from './harness.js';

export async function allEvents(h: Harness): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let after = 0; ; ) {
    const page = await h.store.readAll({ afterPosition: after, limit: 10_000 });
    if (page.length === 0) return out;
    out.push(...page);
    after = page[page.length - 1].position;
  }
}

export async function types(h: Harness, streamId: string): Promise<string[]> {
  return (await h.store.readStream(streamId)).map((e) => e.type);
}

export async function ofType(h: Harness, type: string): Promise<StoredEvent[]> {
  return (await allEvents(h)).filter((e) => e.type === type);
}

export const data = <T = Record<string, unknown>>(e: StoredEvent): T => e.data as T;
