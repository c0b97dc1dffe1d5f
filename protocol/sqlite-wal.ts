// Switching a SQLite file to write-ahead logging when several processes open it at once (the agents, the API and the
// scheduler-relay share the files store's small.sqlite; processes of one fabric share its event store): SQLite can
// answer `PRAGMA journal_mode = WAL` with SQLITE_BUSY at once, without waiting out the connection's busy timeout.
// Seen once in a fresh clone's test run: the scheduler-relay failed to start ("database is locked", small-blobs.ts).
// The switch is tried again, with growing pauses, until the busy timeout has passed. It takes a structural handle
// (better-sqlite3's Database) so that every store imports it without a database package here.

export interface PragmaHandle {
  pragma(source: string): unknown;
}

const pause = new Int32Array(new SharedArrayBuffer(4));

export function enableWal(db: PragmaHandle, waitMs: number, now: () => number = Date.now): void {
  const end = now() + waitMs;
  for (let ms = 1; ; ms = Math.min(ms * 2, 50)) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (e) {
      if ((e as { code?: unknown }).code !== 'SQLITE_BUSY' || now() >= end) throw e;
      Atomics.wait(pause, 0, 0, ms); // a constructor's synchronous open: block this thread briefly
    }
  }
}
