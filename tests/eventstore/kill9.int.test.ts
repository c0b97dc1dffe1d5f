// Kill -9 during a burst of appends: a child process appends and acknowledges each append on stdout; the parent
// SIGKILLs it mid-burst and reopens the store. Every acknowledged event is there at the acknowledged position, none
// is duplicated, positions are contiguous; re-running the whole burst (same deterministic ids) adds only the rest.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { deterministicEventId } from '../../eventstore/event-id.js';
import type { EventStore, StoredEvent } from '../../eventstore/port.js';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from './pg-env.js';

const child = fileURLToPath(new URL('./fixtures/append-burst-child.js', import.meta.url));

/** Runs the burst child; with `killAfter`, SIGKILLs it once that many acks arrived. Returns the acks (i → position). */
function burst(
  target: string,
  size: number,
  killAfter?: number,
): Promise<{ acks: Map<number, number>; killed: boolean }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, target, String(size)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acks = new Map<number, number>();
    let err = '';
    p.stderr.on('data', (d) => (err += d));
    createInterface({ input: p.stdout }).on('line', (line) => {
      const [word, i, position] = line.split(' ');
      if (word !== 'ack') return;
      acks.set(Number(i), Number(position));
      if (killAfter !== undefined && acks.size === killAfter) p.kill('SIGKILL');
    });
    p.on('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve({ acks, killed: true });
      else if (code === 0) resolve({ acks, killed: false });
      else reject(new Error(`burst child exited ${code}: ${err}`));
    });
  });
}

async function readEverything(store: EventStore): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let after = 0; ; ) {
    const page = await store.readAll({ afterPosition: after, limit: 5000 });
    if (page.length === 0) return out;
    out.push(...page);
    after = page[page.length - 1].position;
  }
}

// The burst is long enough that the child is still appending when the kill lands (SQLite appends ~10x faster).
async function checkAfterKill(open: () => Promise<EventStore>, target: string, BURST: number): Promise<void> {
  const first = await burst(target, BURST, 400);
  assert.ok(first.killed, 'the child was killed mid-burst');
  let store = await open();
  let all = await readEverything(store);
  assert.ok(
    all.length >= first.acks.size && all.length < BURST,
    `killed mid-burst: ${all.length} stored, ${first.acks.size} acknowledged`,
  );
  assert.deepEqual(
    all.map((e) => e.position),
    all.map((_, i) => i + 1),
    'positions are contiguous',
  );
  const byId = new Map(all.map((e) => [e.id, e]));
  assert.equal(byId.size, all.length, 'no event is stored twice');
  for (const [i, position] of first.acks) {
    const e = byId.get(deterministicEventId('burst', i));
    assert.ok(e !== undefined, `acknowledged event ${i} is stored`);
    assert.equal(e.position, position, `acknowledged event ${i} is at its acknowledged position`);
  }
  await store.close();

  const second = await burst(target, BURST);
  assert.equal(second.killed, false);
  store = await open();
  all = await readEverything(store);
  assert.equal(all.length, BURST, 'the re-run added exactly the missing events');
  assert.equal(new Set(all.map((e) => e.id)).size, BURST);
  assert.deepEqual(
    all.map((e) => e.position),
    all.map((_, i) => i + 1),
  );
  for (const [i, position] of first.acks)
    assert.equal(second.acks.get(i), position, `re-append of ${i} answered with its original position`);
  await store.close();
}

describe('kill -9 during a burst of appends', () => {
  it('SQLite: no acknowledged append lost, none duplicated', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-kill-'));
    const path = join(dir, 'events.db');
    try {
      await checkAfterKill(async () => new SqliteEventStore({ path }), `sqlite:${path}`, 20_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  if (postgresAvailable('kill -9 on PostgreSQL')) {
    it('PostgreSQL: no acknowledged append lost, none duplicated', async () => {
      const schema = freshSchema('kill');
      await (await PostgresEventStore.open({ connectionString: databaseUrl, schema })).close();
      try {
        await checkAfterKill(
          () => PostgresEventStore.open({ connectionString: databaseUrl, schema }),
          `postgres:${schema}`,
          3000,
        );
      } finally {
        await dropSchema(schema);
      }
    });
  }
});
