// handleCommand under real concurrency: several OS processes increment one counter stream at once, on one SQLite
// file and on PostgreSQL. Every command lands exactly once and every decision saw the latest state.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { EventStore } from '../../eventstore/port.js';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from './pg-env.js';

const child = fileURLToPath(new URL('./fixtures/counter-child.js', import.meta.url));
const PROCESSES = 3;
const EACH = 40;

function runChild(target: string, tag: string): Promise<{ tag: string; attempts: number[] }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, target, String(EACH), tag], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child ${tag} exited ${code}: ${err}`)),
    );
  });
}

async function checkCounter(store: EventStore, results: { tag: string; attempts: number[] }[]): Promise<void> {
  const events = await store.readStream('counter-shared');
  assert.equal(events.length, PROCESSES * EACH, 'every command appended exactly once');
  assert.deepEqual(
    events.map((e) => (e.data as { to: number }).to),
    events.map((_, i) => i + 1),
    'no decision on stale state got in',
  );
  assert.equal(new Set(events.map((e) => e.id)).size, events.length);
  for (const r of results) assert.equal(r.attempts.length, EACH);
}

describe('handleCommand with concurrent processes', () => {
  it('on one SQLite file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-hc-'));
    const path = join(dir, 'events.db');
    try {
      new SqliteEventStore({ path }).close();
      const results = await Promise.all(
        Array.from({ length: PROCESSES }, (_, i) => runChild(`sqlite:${path}`, `p${i}`)),
      );
      const store = new SqliteEventStore({ path });
      try {
        await checkCounter(store, results);
      } finally {
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  if (postgresAvailable('handleCommand on PostgreSQL')) {
    it('on PostgreSQL, with conflicts retried', async () => {
      const schema = freshSchema('hc');
      const store = await PostgresEventStore.open({ connectionString: databaseUrl, schema });
      try {
        const results = await Promise.all(
          Array.from({ length: PROCESSES }, (_, i) => runChild(`postgres:${schema}`, `p${i}`)),
        );
        await checkCounter(store, results);
        const retried = results.flatMap((r) => r.attempts).filter((a) => a > 1).length;
        assert.ok(retried > 0, 'the processes really raced (some commands needed a retry)');
      } finally {
        await store.close();
        await dropSchema(schema);
      }
    });
  }
});
