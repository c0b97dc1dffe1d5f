// Test projections over generic events: a state projection that tallies events per stream and type, and a
// PostgreSQL read model that records each applied event (primary key: an event applied twice fails loudly).
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { EventStore, NewEvent, StoredEvent } from '../../eventstore/port.js';
import type { Projection, ReadModelProjection } from '../../projections/runner/projection.js';

export interface Tally {
  events: number;
  perStream: Record<string, number>;
  perType: Record<string, number>;
  /** Sum of data.n, order-sensitive through the running hash. */
  hash: number;
  lastPosition: number;
}

export function tallyProjection(
  opts: { version?: number; poison?: string; onApply?: (e: StoredEvent) => void } = {},
): Projection<Tally> {
  return {
    name: 'tally',
    version: opts.version ?? 1,
    initialState: () => ({ events: 0, perStream: {}, perType: {}, hash: 0, lastPosition: 0 }),
    apply(s, e) {
      opts.onApply?.(e);
      if (e.type === opts.poison) throw new Error(`cannot apply ${e.type}`);
      const n = (e.data as { n?: number }).n ?? 0;
      return {
        events: s.events + 1,
        perStream: { ...s.perStream, [e.streamId]: (s.perStream[e.streamId] ?? 0) + 1 },
        perType: { ...s.perType, [e.type]: (s.perType[e.type] ?? 0) + 1 },
        hash: (Math.imul(s.hash, 31) + n + e.position) | 0,
        lastPosition: e.position,
      };
    },
  };
}

export function foldAll(events: StoredEvent[], p: Projection<Tally>): Tally {
  return events.reduce((s, e) => p.apply(s, e), p.initialState());
}

export function event(type: string, n: number): NewEvent {
  return {
    id: randomUUID(),
    type,
    version: 1,
    data: { n },
    metadata: { correlationId: 'c', causationId: 'c', actor: 'system:test', at: '2025-03-01T10:00:00.000Z' },
  };
}

/** Appends `count` events spread over `streams` streams. */
export async function appendMany(store: EventStore, count: number, streams = 10, type = 'Counted'): Promise<void> {
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    pending.push(store.append(`tally-${i % streams}`, [event(type, i)], { expectedRevision: 'any' }));
    if (pending.length === 64) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
}

export async function readEverything(store: EventStore): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let after = 0; ; ) {
    const page = await store.readAll({ afterPosition: after, limit: 5000 });
    if (page.length === 0) return out;
    out.push(...page);
    after = page[page.length - 1].position;
  }
}

/** Read model: one row per applied event, and a count per stream. */
export function appliedRowsProjection(
  schema: string,
  opts: { version?: number; poison?: string; killAtPosition?: number; deferredClash?: string } = {},
): ReadModelProjection<pg.PoolClient> {
  const s = `"${schema}"`;
  return {
    name: 'applied_rows',
    version: opts.version ?? 1,
    async setup(tx) {
      await tx.query(`CREATE TABLE IF NOT EXISTS ${s}.rm_applied (event_id uuid PRIMARY KEY, position bigint NOT NULL, stream_id text NOT NULL);
        CREATE TABLE IF NOT EXISTS ${s}.rm_counts (stream_id text PRIMARY KEY, n integer NOT NULL);
        CREATE TABLE IF NOT EXISTS ${s}.rm_keys (k text, CONSTRAINT rm_keys_unique UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)`);
    },
    async reset(tx) {
      await tx.query(`TRUNCATE ${s}.rm_applied, ${s}.rm_counts, ${s}.rm_keys`);
    },
    async handle(e, tx) {
      if (e.type === opts.poison) throw new Error(`read model cannot take ${e.type}`);
      await tx.query(`INSERT INTO ${s}.rm_applied (event_id, position, stream_id) VALUES ($1, $2, $3)`, [
        e.id,
        e.position,
        e.streamId,
      ]);
      await tx.query(
        `INSERT INTO ${s}.rm_counts (stream_id, n) VALUES ($1, 1) ON CONFLICT (stream_id) DO UPDATE SET n = rm_counts.n + 1`,
        [e.streamId],
      );
      // Duplicate keys are caught only at COMMIT (deferred constraint): a commit the database refuses.
      if (opts.deferredClash !== undefined && (e.type === 'Seed' || e.type === opts.deferredClash))
        await tx.query(`INSERT INTO ${s}.rm_keys (k) VALUES ('same')`);
      if (e.position === opts.killAtPosition) process.kill(process.pid, 'SIGKILL');
    },
  };
}
