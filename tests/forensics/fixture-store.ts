// A golden log loaded into a real SQLite event store (in memory), event by event with the recorded revisions.
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { readFixture } from '../golden/record.js';

export async function fixtureStore(
  name: string,
  path = ':memory:',
): Promise<{ store: SqliteEventStore; events: StoredEvent[] }> {
  const { events } = readFixture(name);
  const store = new SqliteEventStore({ path });
  for (const e of events) {
    const r = await store.append(
      e.streamId,
      [{ id: e.id, type: e.type, version: e.version, data: e.data, metadata: e.metadata }],
      { expectedRevision: e.revision === 0 ? 'no_stream' : e.revision - 1 },
    );
    if (r.position !== e.position)
      throw new Error(`fixture ${name}: event ${e.id} landed at ${r.position}, recorded at ${e.position}`);
  }
  return { store, events };
}
