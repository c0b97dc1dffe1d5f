// Switching SQLite to WAL when other processes open the file at once (protocol/sqlite-wal.ts): SQLITE_BUSY is tried
// again until the wait has passed, then thrown; any other error is thrown at once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { enableWal } from '../../protocol/sqlite-wal.js';

const busy = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });

function handle(failures: number, error: () => Error = busy) {
  const calls: string[] = [];
  return {
    calls,
    pragma(source: string): unknown {
      calls.push(source);
      if (calls.length <= failures) throw error();
      return 'wal';
    },
  };
}

test('a busy switch is tried again until it succeeds', () => {
  const h = handle(3);
  enableWal(h, 5000);
  assert.deepEqual(h.calls, Array(4).fill('journal_mode = WAL'));
});

test('still busy when the wait has passed: the busy error is thrown', () => {
  const h = handle(Number.POSITIVE_INFINITY);
  let t = 0;
  assert.throws(
    () => enableWal(h, 100, () => (t += 30)),
    (e: { code?: string }) => e.code === 'SQLITE_BUSY',
  );
  assert.ok(h.calls.length >= 2 && h.calls.length <= 5, `tried ${h.calls.length} times within the wait`);
});

test('any other error is thrown at once', () => {
  const h = handle(1, () => Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' }));
  assert.throws(
    () => enableWal(h, 5000),
    (e: { code?: string }) => e.code === 'SQLITE_IOERR',
  );
  assert.equal(h.calls.length, 1);
});
