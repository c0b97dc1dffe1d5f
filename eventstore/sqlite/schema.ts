// SQLite schema of the embedded event store (one file, WAL). Positions are the rowid: rows are never deleted and
// all appends take the single write lock (BEGIN IMMEDIATE), so positions are 1, 2, 3, … in commit order.
// The audit indexes are partial (`WHERE audit = 1`): an append writes only the two indexes it needs (stream
// revision, event id key); rows are flagged into the audit indexes in batches behind the head (es_meta
// 'audit_position'), and always up to the head before a query is answered. Each index written per commit costs
// a page write to the WAL; deferring five of seven roughly doubles single-event appends on this disk.
// Version 2 indexes event ids by a 32-bit key (event-key.ts) instead of the id text; a version 1 file is migrated
// when it is opened (one pass over its rows).
import type Database from 'better-sqlite3';
import { FabricError } from '../../protocol/errors.js';
import { EventStoreErrorCode } from '../errors.js';
import { eventIdKey } from './event-key.js';

export const SQLITE_SCHEMA_VERSION = 2;

const TABLES = `
CREATE TABLE IF NOT EXISTS es_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS es_events (
  position INTEGER PRIMARY KEY,
  stream_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  event_id TEXT NOT NULL,
  type TEXT NOT NULL,
  version INTEGER NOT NULL,
  data TEXT NOT NULL,
  correlation_id TEXT NOT NULL,
  causation_id TEXT NOT NULL,
  actor TEXT NOT NULL,
  at TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  metadata_extra TEXT,
  audit INTEGER NOT NULL DEFAULT 0,
  id_key INTEGER NOT NULL DEFAULT 0
);
`;

const INDEXES = `
CREATE UNIQUE INDEX IF NOT EXISTS es_events_stream ON es_events (stream_id, revision);
CREATE INDEX IF NOT EXISTS es_events_id_key ON es_events (id_key);
CREATE INDEX IF NOT EXISTS es_events_correlation ON es_events (correlation_id) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_causation ON es_events (causation_id) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_actor ON es_events (actor) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_type ON es_events (type) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_at ON es_events (at_ms) WHERE audit = 1;
`;

/** Version 1 → 2: the event id index becomes the id key index. */
function migrateFrom1(db: Database.Database): void {
  db.function('es_event_id_key', { deterministic: true }, (id) => eventIdKey(String(id)));
  db.exec(`ALTER TABLE es_events ADD COLUMN id_key INTEGER NOT NULL DEFAULT 0`);
  db.exec(`UPDATE es_events SET id_key = es_event_id_key(event_id)`);
  db.exec(`DROP INDEX IF EXISTS es_events_event_id`);
}

export function migrate(db: Database.Database): void {
  db.transaction(() => {
    db.exec(TABLES);
    const row = db.prepare(`SELECT value FROM es_meta WHERE key = 'schema_version'`).get() as
      | { value: string }
      | undefined;
    if (row === undefined) {
      db.prepare(`INSERT INTO es_meta (key, value) VALUES ('schema_version', ?)`).run(String(SQLITE_SCHEMA_VERSION));
      db.prepare(`INSERT INTO es_meta (key, value) VALUES ('audit_position', '0')`).run();
    } else if (row.value === '1') {
      migrateFrom1(db);
      db.prepare(`UPDATE es_meta SET value = ? WHERE key = 'schema_version'`).run(String(SQLITE_SCHEMA_VERSION));
    } else if (Number(row.value) !== SQLITE_SCHEMA_VERSION) {
      throw new FabricError(
        EventStoreErrorCode.schemaUnsupported,
        500,
        `the event store file has schema version ${row.value}; this build reads versions 1 (migrated when opened) and ${SQLITE_SCHEMA_VERSION}`,
        { hint: 'open it with the build that wrote it, or migrate the file' },
      );
    }
    db.exec(INDEXES);
  }).immediate();
}
