// Stored events straight from SQL rows. better-sqlite3 12 on Node 20 builds every returned row with one V8
// property store per column (~0.2 µs each, most of a read's cost); a SQL function receives the columns as call
// arguments instead, so reads select `es_stored_event(<columns>)` and the function builds each StoredEvent from its
// arguments into the page being read: ~30% less time per event on a replay here (docs/event-store.md).
import type Database from 'better-sqlite3';
import type { EventMetadata, JsonValue, StoredEvent } from '../port.js';
import type { WrittenEvent } from './tail-cache.js';

const COLUMNS =
  'position, stream_id, revision, event_id, type, version, data, correlation_id, causation_id, actor, at, metadata_extra';

/** The select list that turns a row of es_events into one stored event (read with `EventRows.read`). */
export const STORED_EVENT = `es_stored_event(${COLUMNS})`;

/** Distinct event types kept interned; a store with more types than this interns the first ones only. */
const MAX_TYPES = 4096;

export class EventRows {
  private page: StoredEvent[] | undefined;
  // Every event's type as one interned string per type: consumers switch on `type` (each projection compares it
  // with several literals per event), and interned strings compare by identity instead of by content.
  private readonly types = new Map<string, string>();

  constructor(db: Database.Database) {
    db.function(
      'es_stored_event',
      { deterministic: false, directOnly: true },
      (position, streamId, revision, id, type, version, data, correlationId, causationId, actor, at, extra) => {
        const page = this.page;
        if (page === undefined) throw new Error('es_stored_event() builds events for EventRows.read only');
        page.push(
          this.event(
            position as number,
            streamId as string,
            revision as number,
            id as string,
            type as string,
            version as number,
            data as string,
            correlationId as string,
            causationId as string,
            actor as string,
            at as string,
            extra as string | null,
          ),
        );
        return null;
      },
    );
  }

  /**
   * The stored event of one row's columns (`data` and `extra` as the JSON text stored). Positional, as SQLite hands
   * the columns over: no object per row before the event itself. The store's tail of its own commits decodes with it
   * too (tail-cache.ts), so both give the same events.
   */
  event(
    position: number,
    streamId: string,
    revision: number,
    id: string,
    type: string,
    version: number,
    data: string,
    correlationId: string,
    causationId: string,
    actor: string,
    at: string,
    extra: string | null,
  ): StoredEvent {
    const metadata: EventMetadata = { correlationId, causationId, actor, at };
    if (extra !== null) Object.assign(metadata, JSON.parse(extra) as Record<string, JsonValue>);
    return {
      id,
      type: this.types.get(type) ?? this.intern(type),
      version,
      data: JSON.parse(data) as JsonValue,
      metadata,
      streamId,
      revision,
      position,
    };
  }

  /** The stored event of a row this connection wrote (the store's tail of its commits, tail-cache.ts). */
  written(w: WrittenEvent): StoredEvent {
    return this.event(
      w.position,
      w.streamId,
      w.revision,
      w.id,
      w.type,
      w.version,
      w.dataJson,
      w.correlationId,
      w.causationId,
      w.actor,
      w.at,
      w.extraJson,
    );
  }

  private intern(type: string): string {
    // A property key is interned by V8; reading it back gives the interned string.
    const interned = Object.keys({ [type]: true })[0];
    if (this.types.size < MAX_TYPES) this.types.set(interned, interned);
    return interned;
  }

  /**
   * Runs a statement selecting `STORED_EVENT` (pluck mode) and returns its rows as stored events, in order. The
   * function runs as SQLite evaluates the select list, so the statement's ORDER BY and LIMIT must be answered by
   * the scan itself (rowid, or an index in that order): a sort step would build the events before sorting them.
   */
  read(statement: Database.Statement, ...params: unknown[]): StoredEvent[] {
    const page: StoredEvent[] = [];
    this.page = page;
    try {
      statement.all(...params);
    } finally {
      this.page = undefined;
    }
    return page;
  }
}
