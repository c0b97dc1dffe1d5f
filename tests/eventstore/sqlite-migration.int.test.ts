// A store file written by schema version 1 (event ids indexed by their text) opened by this build: migrated in
// place to version 2 (ids indexed by a 32-bit key), nothing lost, ids still unique, and a version the build does
// not know refused without a change.
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { deterministicEventId } from '../../eventstore/event-id.js';
import type { NewEvent } from '../../eventstore/port.js';
import { eventIdKey } from '../../eventstore/sqlite/event-key.js';
import { SQLITE_SCHEMA_VERSION } from '../../eventstore/sqlite/schema.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';

// The version 1 tables and indexes, as that build created them.
const VERSION_1_DDL = `
CREATE TABLE es_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE es_events (
  position INTEGER PRIMARY KEY, stream_id TEXT NOT NULL, revision INTEGER NOT NULL, event_id TEXT NOT NULL,
  type TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL, correlation_id TEXT NOT NULL,
  causation_id TEXT NOT NULL, actor TEXT NOT NULL, at TEXT NOT NULL, at_ms INTEGER NOT NULL, metadata_extra TEXT,
  audit INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX es_events_stream ON es_events (stream_id, revision);
CREATE UNIQUE INDEX es_events_event_id ON es_events (event_id);
CREATE INDEX es_events_correlation ON es_events (correlation_id) WHERE audit = 1;
CREATE INDEX es_events_causation ON es_events (causation_id) WHERE audit = 1;
CREATE INDEX es_events_actor ON es_events (actor) WHERE audit = 1;
CREATE INDEX es_events_type ON es_events (type) WHERE audit = 1;
CREATE INDEX es_events_at ON es_events (at_ms) WHERE audit = 1;
INSERT INTO es_meta VALUES ('schema_version', '1'), ('audit_position', '0');
`;

const at = '2025-03-01T10:00:00.000Z';
const event = (i: number): NewEvent => ({
  id: deterministicEventId('migration-test', i),
  type: i % 2 === 0 ? 'Even' : 'Odd',
  version: 1,
  data: { i },
  metadata: { correlationId: `c-${i}`, causationId: `c-${i}`, actor: 'system:test', at },
});

function writeVersion1(path: string, count: number): void {
  const db = new Database(path);
  db.exec(VERSION_1_DDL);
  const insert = db.prepare(
    `INSERT INTO es_events (stream_id, revision, event_id, type, version, data, correlation_id, causation_id, actor, at, at_ms)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  for (let i = 0; i < count; i++) {
    const e = event(i);
    insert.run(
      `s-${i % 3}`,
      Math.floor(i / 3),
      e.id,
      e.type,
      1,
      JSON.stringify(e.data),
      `c-${i}`,
      `c-${i}`,
      'system:test',
      at,
      Date.parse(at),
    );
  }
  db.close();
}

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tempFile = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-es-migrate-'));
  dirs.push(dir);
  return join(dir, 'events.db');
};

describe('SQLite event store schema migration', () => {
  it('migrates a version 1 file when it is opened: events kept, ids keyed, duplicates still refused or no-ops', async () => {
    const path = tempFile();
    writeVersion1(path, 30);
    const store = new SqliteEventStore({ path, pollIntervalMs: 20 });
    try {
      assert.equal(
        store.db.prepare(`SELECT value FROM es_meta WHERE key = 'schema_version'`).pluck(true).get(),
        String(SQLITE_SCHEMA_VERSION),
      );
      const indexes = store.db
        .prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'es_events'`)
        .pluck(true)
        .all();
      assert.ok(
        indexes.includes('es_events_id_key') && !indexes.includes('es_events_event_id'),
        `indexes: ${indexes.join(', ')}`,
      );
      const keys = store.db.prepare(`SELECT event_id, id_key FROM es_events`).all() as {
        event_id: string;
        id_key: number;
      }[];
      assert.equal(keys.length, 30);
      for (const k of keys) assert.equal(k.id_key, eventIdKey(k.event_id));

      const all = await store.readAll({ afterPosition: 0, limit: 100 });
      assert.deepEqual(
        all.map((e) => e.id),
        Array.from({ length: 30 }, (_, i) => event(i).id),
      );
      assert.deepEqual(
        (await store.readStream('s-1')).map((e) => e.revision),
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      );

      // A repeat of stored events answers with their original result; the same id in another stream is refused.
      const repeat = await store.append('s-0', [event(27)], { expectedRevision: 8 });
      assert.equal(repeat.position, 28);
      await assert.rejects(store.append('s-new', [event(4)], { expectedRevision: 'no_stream' }), {
        code: 'ES_EVENT_ID_CONFLICT',
      });
      const fresh = await store.append('s-0', [event(30)], { expectedRevision: 9 });
      assert.equal(fresh.position, 31);
      assert.deepEqual(
        (await store.query({ type: 'Odd' })).map((e) => e.position),
        Array.from({ length: 15 }, (_, i) => 2 * i + 2),
      );
    } finally {
      await store.close();
    }
    // Reopened, it is version 2 and not migrated again.
    const again = new SqliteEventStore({ path });
    assert.equal((await again.readAll({ afterPosition: 0, limit: 100 })).length, 31);
    await again.close();
  });

  it('refuses a file of a schema version it does not read, changing nothing', () => {
    const path = tempFile();
    const db = new Database(path);
    db.exec(VERSION_1_DDL);
    db.prepare(`UPDATE es_meta SET value = '9' WHERE key = 'schema_version'`).run();
    db.close();
    assert.throws(() => new SqliteEventStore({ path }), {
      code: 'ES_SCHEMA_UNSUPPORTED',
      message: /schema version 9; this build reads versions 1 \(migrated when opened\) and 2/,
    });
    const check = new Database(path, { readonly: true });
    assert.equal(check.prepare(`SELECT value FROM es_meta WHERE key = 'schema_version'`).pluck(true).get(), '9');
    assert.equal(
      check.prepare(`SELECT count(*) FROM pragma_table_info('es_events') WHERE name = 'id_key'`).pluck(true).get(),
      0,
    );
    check.close();
  });
});
