// SQLite schema of the embedded event store (one file, WAL). Positions are the rowid: rows are never deleted and
// all appends take the single write lock (BEGIN IMMEDIATE), so positions are 1, 2, 3, … in commit order.
// The audit indexes are partial (`WHERE audit = 1`): an append writes only the two indexes it needs (stream
// revision, event id); rows are flagged into the audit indexes in batches behind the head (es_meta
// 'audit_position'), and always up to the head before a query is answered. Each index written per commit costs
// a page write to the WAL; deferring five of seven roughly doubles single-event appends on this disk.
import type Database from 'better-sqlite3';
import { FabricError } from '../../protocol/errors.js';
import { EventStoreErrorCode } from '../errors.js';

export const SQLITE_SCHEMA_VERSION = 1;

const DDL = `
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
  audit INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS es_events_stream ON es_events (stream_id, revision);
CREATE UNIQUE INDEX IF NOT EXISTS es_events_event_id ON es_events (event_id);
CREATE INDEX IF NOT EXISTS es_events_correlation ON es_events (correlation_id) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_causation ON es_events (causation_id) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_actor ON es_events (actor) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_type ON es_events (type) WHERE audit = 1;
CREATE INDEX IF NOT EXISTS es_events_at ON es_events (at_ms) WHERE audit = 1;
`;

export function migrate(db: Database.Database): void {
  db.transaction(() => {
    db.exec(DDL);
    const row = db.prepare(`SELECT value FROM es_meta WHERE key = 'schema_version'`).get() as { value: string } | undefined;
    if (row === undefined) {
      db.prepare(`INSERT INTO es_meta (key, value) VALUES ('schema_version', ?)`).run(String(SQLITE_SCHEMA_VERSION));
      db.prepare(`INSERT INTO es_meta (key, value) VALUES ('audit_position', '0')`).run();
    } else if (Number(row.value) !== SQLITE_SCHEMA_VERSION) {
      throw new FabricError(
        EventStoreErrorCode.schemaUnsupported,
        500,
        `the event store file has schema version ${row.value}; this build reads version ${SQLITE_SCHEMA_VERSION}`,
        { hint: 'open it with the build that wrote it, or migrate the file' },
      );
    }
  }).immediate();
}
