// The PostgreSQL store releases its append lock before the commit (group commit across processes), so appends can
// become visible out of position order. Against the real server at DATABASE_URL: readers stop below an append still
// in flight and skip one rolled back, appends to one stream still refuse a stale expected revision, an event id
// being written elsewhere refuses only the append that reuses it, and eight writers lose or reorder nothing for a
// subscriber. An append "in flight" is held open by calling es_append inside an explicit transaction.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import pg from 'pg';
import { isWrongExpectedRevision } from '../../eventstore/errors.js';
import type { ExpectedRevision, NewEvent, StoredEvent } from '../../eventstore/port.js';
import { esAppendQuery, PostgresEventStore } from '../../eventstore/postgres/store.js';
import { checkNewEvents } from '../../eventstore/validate.js';
import { isFabricError } from '../../protocol/errors.js';
import { newEvent } from './contract.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from './pg-env.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

async function readAllOf(store: PostgresEventStore, from: number): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let afterPosition = from; ; ) {
    const page = await store.readAll({ afterPosition, limit: 500 });
    if (page.length === 0) return out;
    out.push(...page);
    afterPosition = page[page.length - 1].position;
  }
}

if (postgresAvailable('the PostgreSQL commit-order tests')) {
  describe('PostgreSQL event store: appends committed out of position order', () => {
    let schema: string;
    let store: PostgresEventStore;
    let other: PostgresEventStore;
    const held: pg.Client[] = [];

    /** Starts an append inside an open transaction: its positions are taken, its commit is up to the test. */
    async function holdAppend(streamId: string, events: NewEvent[], expected: ExpectedRevision = 'any') {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      held.push(client);
      await client.query('BEGIN');
      const r = await client.query<{ r: { s: number[]; p: number[] } }>(
        esAppendQuery(schema, [{ streamId, expected, events: checkNewEvents(events) }]),
      );
      assert.deepEqual(r.rows[0].r.s, [1], 'the held append is written (not yet committed)');
      return { client, position: Number(r.rows[0].r.p[0]) };
    }

    before(async () => {
      schema = freshSchema('order');
      store = await PostgresEventStore.open({ connectionString: databaseUrl, schema, pollIntervalMs: 50 });
      other = await PostgresEventStore.open({ connectionString: databaseUrl, schema, pollIntervalMs: 50 });
    });
    // A held append left open by a failed test would hold its locks: ending its connection rolls it back.
    afterEach(async () => {
      await Promise.all(held.splice(0).map((c) => c.end().catch(() => undefined)));
    });
    after(async () => {
      await store.close();
      await other.close();
      await dropSchema(schema);
    });

    it('stops readers below an append still in flight and delivers it in order once it commits', async () => {
      const base = await store.headPosition();
      const seen: StoredEvent[] = [];
      const sub = store.subscribeAll({ afterPosition: base }, (e) => {
        seen.push(e);
      });
      const a = await holdAppend(`held-${randomUUID()}`, [newEvent('Held', { n: 1 }), newEvent('Held', { n: 2 })]);
      const b = await other.append(`later-${randomUUID()}`, [newEvent('Later', { n: 3 })], { expectedRevision: 'any' });
      assert.equal(a.position, base + 2);
      assert.equal(b.position, base + 3, 'the later append takes the next position although the first is open');
      await sleep(300);
      assert.equal(seen.length, 0, 'nothing is delivered past the open append');
      assert.deepEqual(await store.readAll({ afterPosition: base }), [], 'readAll stops there too');
      assert.equal(
        (await store.query({ type: 'Later', afterPosition: base })).length,
        0,
        'a filtered query answers only below the open append',
      );
      await a.client.query('COMMIT');
      await waitFor(() => seen.length === 3, 'the three events');
      assert.deepEqual(
        seen.map((e) => [e.position, e.type]),
        [
          [base + 1, 'Held'],
          [base + 2, 'Held'],
          [base + 3, 'Later'],
        ],
      );
      assert.equal((await store.query({ type: 'Later', afterPosition: base })).length, 1);
      await sub.stop();
    });

    it('skips the positions of an append rolled back after taking them', async () => {
      const base = await store.headPosition();
      const seen: StoredEvent[] = [];
      const sub = store.subscribeAll({ afterPosition: base }, (e) => {
        seen.push(e);
      });
      const a = await holdAppend(`lost-${randomUUID()}`, [newEvent('Lost', {})]);
      const inFlightToo = await holdAppend(`slow-${randomUUID()}`, [newEvent('Slow', {})]);
      await other.append(`after-${randomUUID()}`, [newEvent('After', {})], { expectedRevision: 'any' });
      await a.client.query('ROLLBACK');
      await sleep(300);
      assert.equal(seen.length, 0, 'the rolled-back position is skipped, but not the append still in flight after it');
      await inFlightToo.client.query('COMMIT');
      await waitFor(() => seen.length === 2, 'the two committed events');
      assert.deepEqual(
        seen.map((e) => [e.position, e.type]),
        [
          [base + 2, 'Slow'],
          [base + 3, 'After'],
        ],
      );
      const next = await other.append(`next-${randomUUID()}`, [newEvent('Next', {})], { expectedRevision: 'any' });
      assert.equal(next.position, base + 4);
      await waitFor(() => seen.length === 3, 'the next event');
      await sub.stop();
    });

    it('makes an append to a stream with an append in flight wait for it, then decide on its outcome', async () => {
      const stream = `one-${randomUUID()}`;
      const a = await holdAppend(stream, [newEvent('First', {})], 'no_stream');
      let settled = false;
      const second = other.append(stream, [newEvent('Second', {})], { expectedRevision: 'no_stream' }).finally(() => {
        settled = true;
      });
      second.catch(() => undefined);
      await sleep(300);
      assert.equal(settled, false, 'the second append waits for the first to commit');
      await a.client.query('COMMIT');
      await assert.rejects(second, (e) => isWrongExpectedRevision(e));
      const third = await other.append(stream, [newEvent('Third', {})], { expectedRevision: 0 });
      assert.equal(third.nextRevision, 1);
      assert.deepEqual(
        (await store.readStream(stream)).map((e) => [e.revision, e.type]),
        [
          [0, 'First'],
          [1, 'Third'],
        ],
      );
    });

    it('refuses only the append that reuses an event id being written by another transaction', async () => {
      const shared = newEvent('Shared', {});
      const a = await holdAppend(`owner-${randomUUID()}`, [shared]);
      const reuse = `reuse-${randomUUID()}`;
      const bystander = `bystander-${randomUUID()}`;
      const results = Promise.allSettled([
        other.append(reuse, [shared], { expectedRevision: 'any' }),
        other.append(bystander, [newEvent('Bystander', {})], { expectedRevision: 'any' }),
      ]);
      await sleep(200);
      await a.client.query('COMMIT');
      const [r1, r2] = await results;
      assert.equal(r1.status, 'rejected');
      assert.ok(isFabricError((r1 as PromiseRejectedResult).reason));
      assert.equal((r1 as PromiseRejectedResult).reason.code, 'ES_EVENT_ID_CONFLICT');
      assert.equal(r2.status, 'fulfilled', 'the other append of the same batch is written');
      assert.equal((await store.readStream(bystander)).length, 1);
      assert.equal(await store.streamRevision(reuse), -1);
    });

    it('eight writers with appends in flight: every event once, in position order, positions contiguous', async () => {
      const base = await store.headPosition();
      const seen: StoredEvent[] = [];
      const sub = store.subscribeAll({ afterPosition: base, batchSize: 64 }, (e) => {
        seen.push(e);
      });
      const writers = await Promise.all(
        Array.from({ length: 8 }, () =>
          PostgresEventStore.open({ connectionString: databaseUrl, schema, poolSize: 2 }),
        ),
      );
      const run = randomUUID().slice(0, 8);
      let conflicts = 0;
      try {
        await Promise.all(
          writers.flatMap((w, k) =>
            Array.from({ length: 8 }, async (_, lane) => {
              // Lanes 0-5 own their stream; lanes 6 and 7 of every writer race for one shared stream.
              const stream = lane < 6 ? `w-${run}-${k}-${lane}` : `shared-${run}`;
              for (let i = 0; i < 25; i++) {
                for (;;) {
                  const revision = await w.streamRevision(stream);
                  try {
                    await w.append(stream, [newEvent('W', { k, lane, i })], {
                      expectedRevision: revision < 0 ? 'no_stream' : revision,
                    });
                    break;
                  } catch (e) {
                    if (!isWrongExpectedRevision(e)) throw e;
                    conflicts++;
                  }
                }
              }
            }),
          ),
        );
      } finally {
        await Promise.all(writers.map((w) => w.close()));
      }
      const total = 8 * 8 * 25;
      await waitFor(() => seen.length >= total, 'every event delivered');
      await sleep(100);
      assert.equal(seen.length, total, 'none twice');
      assert.deepEqual(
        seen.map((e) => e.position),
        seen.map((_, i) => base + 1 + i),
        'in position order, none skipped, positions contiguous',
      );
      assert.equal(new Set(seen.map((e) => e.id)).size, total);
      const shared = await store.readStream(`shared-${run}`);
      assert.equal(shared.length, 8 * 2 * 25, 'every append to the raced stream landed once');
      assert.deepEqual(
        shared.map((e) => e.revision),
        shared.map((_, i) => i),
      );
      assert.ok(conflicts > 0, 'the raced stream refused stale expected revisions');
      const all = await readAllOf(store, base);
      assert.deepEqual(
        all.map((e) => e.id),
        seen.map((e) => e.id),
        'readAll returns the same log',
      );
      await sub.stop();
    });
  });
}
