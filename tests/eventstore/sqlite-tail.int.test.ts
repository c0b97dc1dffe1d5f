// Subscriptions on the embedded store read this connection's latest commits from its tail (tail-cache.ts) and
// everything else from SQL: the events are the same as SQL gives, and commits of other connections — another store on
// the same file in this process, another process — are never hidden behind the tail.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, it } from 'node:test';
import { deterministicEventId } from '../../eventstore/event-id.js';
import type { NewEvent, StoredEvent } from '../../eventstore/port.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { until } from '../support/until.js';

const dir = mkdtempSync(join(tmpdir(), 'ndif-es-tail-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const event = (who: string, i: number): NewEvent => ({
  id: deterministicEventId(`tail-${who}`, i),
  type: `Noted${who}`,
  version: 1,
  data: { who, i, list: [i, { deep: i }] },
  metadata: {
    correlationId: `c-${who}-${i}`,
    causationId: `c-${who}-${i}`,
    actor: 'system:test',
    at: '2025-03-01T10:00:00.000Z',
    commandId: `cmd-${who}-${i}`,
  },
});
const append = (s: SqliteEventStore, who: string, i: number) =>
  s.append(`note-${who}-${i}`, [event(who, i)], { expectedRevision: 'no_stream' });

function follow(store: SqliteEventStore): { seen: StoredEvent[]; stop(): Promise<void> } {
  const seen: StoredEvent[] = [];
  const sub = store.subscribeAll({ afterPosition: 0 }, (e) => {
    seen.push(e);
  });
  return { seen, stop: () => sub.stop() };
}

it("another store on the same file: its commits reach this store's subscriptions, between and after this one's", async () => {
  const path = join(dir, 'two.db');
  const a = new SqliteEventStore({ path, pollIntervalMs: 20 });
  const b = new SqliteEventStore({ path, pollIntervalMs: 20 });
  try {
    const sub = follow(a);
    const order: string[] = [];
    const step = async (s: SqliteEventStore, who: string, i: number) => {
      await append(s, who, i);
      order.push(`${who}${i}`);
      // Caught up after each commit, so the next read is the one at the tail's head.
      await until(
        () => `${order.length} events seen`,
        () => sub.seen.length === order.length,
        5000,
      );
    };
    await step(a, 'A', 1);
    await step(a, 'A', 2);
    await step(b, 'B', 1);
    await step(a, 'A', 3);
    await step(b, 'B', 2);
    await step(b, 'B', 3);
    await step(a, 'A', 4);
    await step(a, 'A', 5);
    assert.deepEqual(
      sub.seen.map((e) => `${(e.data as { who: string }).who}${(e.data as { i: number }).i}`),
      order,
    );
    assert.deepEqual(
      sub.seen.map((e) => e.position),
      order.map((_, i) => i + 1),
    );
    // The same events as SQL gives (metadata beyond the four fields included), frozen where they came from the tail.
    const fromSql = await a.readAll({ afterPosition: 0 });
    assert.deepEqual(sub.seen, fromSql);
    assert.ok(
      sub.seen.some((e) => Object.isFrozen(e.data)),
      'some were read from the tail',
    );
    await sub.stop();
  } finally {
    await a.close();
    await b.close();
  }
});

it('another process appending to the file: a caught-up subscription still sees its commits (by polling)', async () => {
  const path = join(dir, 'process.db');
  const a = new SqliteEventStore({ path, pollIntervalMs: 20 });
  try {
    const sub = follow(a);
    await append(a, 'A', 1);
    await append(a, 'A', 2);
    await until(
      () => 'the first two',
      () => sub.seen.length === 2,
      5000,
    );
    const storeModule = fileURLToPath(new URL('../../eventstore/sqlite/store.js', import.meta.url));
    const idModule = fileURLToPath(new URL('../../eventstore/event-id.js', import.meta.url));
    const script = `
      const { SqliteEventStore } = await import(${JSON.stringify(storeModule)});
      const { deterministicEventId } = await import(${JSON.stringify(idModule)});
      const s = new SqliteEventStore({ path: ${JSON.stringify(path)} });
      const at = '2025-03-01T10:00:00.000Z';
      for (const i of [1, 2]) await s.append('note-P-' + i, [{ id: deterministicEventId('tail-P', i), type: 'NotedP', version: 1,
        data: { who: 'P', i }, metadata: { correlationId: 'c', causationId: 'c', actor: 'system:test', at } }], { expectedRevision: 'no_stream' });
      await s.close();`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    await append(a, 'A', 3);
    await until(
      () => `five events (saw ${sub.seen.length})`,
      () => sub.seen.length === 5,
      5000,
    );
    assert.deepEqual(
      sub.seen.map((e) => `${(e.data as { who: string }).who}${(e.data as { i: number }).i}`),
      ['A1', 'A2', 'P1', 'P2', 'A3'],
    );
    assert.deepEqual(sub.seen, await a.readAll({ afterPosition: 0 }));
    await sub.stop();
  } finally {
    await a.close();
  }
});
