// The one contract every EventStore adapter passes. Each adapter's *.int.test.ts calls runEventStoreContract with a
// factory for isolated stores. Tests put their events in streams with a unique prefix and read the global log from
// a baseline head, so they also hold on a shared server (KurrentDB).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { AggregateCache } from '../../eventstore/aggregate-cache.js';
import { isWrongExpectedRevision } from '../../eventstore/errors.js';
import { handleCommand, typeDataCodec } from '../../eventstore/handle-command.js';
import type { EventStore, NewEvent, StoredEvent } from '../../eventstore/port.js';
import { isFabricError } from '../../protocol/errors.js';
import { counterDecider, type Counter, type CounterEvent } from './counter.js';

export interface StoreUnderTest {
  /** Opens a new instance (its own connection) on the same underlying store. */
  open(): Promise<EventStore>;
  /** Removes the store's data (files, schema). */
  destroy(): Promise<void>;
}

export interface ContractTarget {
  name: string;
  /** Creates an empty, isolated store where the backend allows (a shared KurrentDB server does not). */
  create(): Promise<StoreUnderTest>;
}

const AT = '2025-03-01T10:00:00.000Z';

export function newEvent(type: string, data: NewEvent['data'], meta: Partial<NewEvent['metadata']> = {}): NewEvent {
  return {
    id: randomUUID(),
    type,
    version: 1,
    data,
    metadata: { correlationId: 'corr-1', causationId: 'cmd-1', actor: 'system:test', at: AT, ...meta },
  };
}

function events(n: number, type = 'Thing', meta: Partial<NewEvent['metadata']> = {}): NewEvent[] {
  return Array.from({ length: n }, (_, i) => newEvent(type, { i }, meta));
}

async function rejectsWithCode(p: Promise<unknown>, code: string): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    assert.ok(isFabricError(e), `expected a FabricError with code ${code}, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    assert.ok(e.message.length > 10, 'the error message says what was wrong');
    return e;
  }
  assert.fail(`expected rejection with ${code}`);
}

/** Reads the global log after `baseline`, keeping the events of streams that start with `prefix`. */
async function readOwn(store: EventStore, baseline: number, prefix: string, limit = 1000): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  let after = baseline;
  for (;;) {
    const page = await store.readAll({ afterPosition: after, limit });
    if (page.length === 0) return out;
    out.push(...page.filter((e) => e.streamId.startsWith(prefix)));
    after = page[page.length - 1].position;
  }
}

function waitFor(cond: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      if (cond()) return resolve();
      if (Date.now() - started > timeoutMs) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 5);
    };
    tick();
  });
}

export function runEventStoreContract(target: ContractTarget): void {
  describe(`event store contract: ${target.name}`, () => {
    let sut: StoreUnderTest;
    let store: EventStore;
    let prefix: string;
    let n = 0;
    const stream = (name = 's') => `${prefix}${name}-${++n}`;

    before(async () => {
      sut = await target.create();
      store = await sut.open();
      prefix = `t${randomUUID().slice(0, 8)}-`;
    });
    after(async () => {
      await store?.close();
      await sut?.destroy();
    });

    it('appends and reads a stream in order, with 0-based revisions and increasing positions', async () => {
      const s = stream();
      const first = events(3);
      const r1 = await store.append(s, first, { expectedRevision: 'no_stream' });
      assert.equal(r1.nextRevision, 2);
      const r2 = await store.append(s, events(2), { expectedRevision: 2 });
      assert.equal(r2.nextRevision, 4);
      assert.ok(r2.position > r1.position);
      const read = await store.readStream(s);
      assert.deepEqual(
        read.map((e) => e.revision),
        [0, 1, 2, 3, 4],
      );
      assert.deepEqual(
        read.slice(0, 3).map((e) => e.id),
        first.map((e) => e.id),
      );
      for (let i = 1; i < read.length; i++) assert.ok(read[i].position > read[i - 1].position);
      assert.equal(read[2].position, r1.position);
      assert.equal(read[4].position, r2.position);
      assert.equal(await store.streamRevision(s), 4);
      assert.equal(await store.streamRevision(stream('missing')), -1);
      assert.deepEqual(await store.readStream(stream('missing')), []);
      assert.deepEqual(
        (await store.readStream(s, { fromRevision: 3 })).map((e) => e.revision),
        [3, 4],
      );
      assert.deepEqual(
        (await store.readStream(s, { fromRevision: 1, limit: 2 })).map((e) => e.revision),
        [1, 2],
      );
    });

    it('round-trips type, version, JSON data and metadata including extra fields', async () => {
      const s = stream();
      const e: NewEvent = {
        id: randomUUID(),
        type: 'ReplicaPlaced',
        version: 3,
        data: {
          model: 'gpt2',
          gpus: [0, 1],
          bytes: 123456789012,
          nested: { ok: true, none: null, text: 'ünïcødé "quoted" \\ back' },
        },
        metadata: {
          correlationId: 'c-7',
          causationId: 'k-9',
          actor: 'key:alice',
          at: '2025-03-01T10:00:00.123Z',
          requestId: 'r-1',
          attempt: 2,
        },
      };
      await store.append(s, [e], { expectedRevision: 'no_stream' });
      const [read] = await store.readStream(s);
      assert.deepEqual(
        { id: read.id, type: read.type, version: read.version, data: read.data, metadata: read.metadata },
        e,
      );
      assert.equal(read.streamId, s);
      assert.equal(read.revision, 0);
      assert.ok(Number.isSafeInteger(read.position) && read.position > 0);
    });

    it('enforces expected revision: no_stream, exists, a number and any', async () => {
      const s = stream();
      await rejectsWithCode(store.append(s, events(1), { expectedRevision: 'exists' }), 'ES_WRONG_EXPECTED_REVISION');
      await rejectsWithCode(store.append(s, events(1), { expectedRevision: 0 }), 'ES_WRONG_EXPECTED_REVISION');
      await store.append(s, events(1), { expectedRevision: 'no_stream' });
      const e = await rejectsWithCode(
        store.append(s, events(1), { expectedRevision: 'no_stream' }),
        'ES_WRONG_EXPECTED_REVISION',
      );
      assert.ok(isWrongExpectedRevision(e));
      assert.equal(e.actual, 0);
      assert.equal(e.streamId, s);
      await rejectsWithCode(store.append(s, events(1), { expectedRevision: 5 }), 'ES_WRONG_EXPECTED_REVISION');
      await store.append(s, events(1), { expectedRevision: 'exists' });
      await store.append(s, events(1), { expectedRevision: 2 - 1 });
      await store.append(s, events(1), { expectedRevision: 'any' });
      await store.append(stream(), events(1), { expectedRevision: 'any' });
      assert.equal(await store.streamRevision(s), 3, 'refused appends wrote nothing');
    });

    it('lets exactly one of two racing writers win an expected revision', async () => {
      const other = await sut.open();
      try {
        for (let round = 0; round < 20; round++) {
          const s = stream('race');
          await store.append(s, events(1), { expectedRevision: 'no_stream' });
          const results = await Promise.allSettled([
            store.append(s, events(2), { expectedRevision: 0 }),
            other.append(s, events(2), { expectedRevision: 0 }),
          ]);
          const won = results.filter((r) => r.status === 'fulfilled');
          const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
          assert.equal(won.length, 1, `round ${round}: exactly one writer wins`);
          assert.equal(lost.length, 1);
          assert.ok(isWrongExpectedRevision(lost[0].reason), String(lost[0].reason));
          assert.equal((await store.readStream(s)).length, 3);
        }
      } finally {
        await other.close();
      }
    });

    it('decides appends issued together in order: a later one sees what an earlier one wrote', async () => {
      const s = stream('together');
      const t = stream('together');
      const first = events(2);
      const second = events(1);
      const results = await Promise.allSettled([
        store.append(s, first, { expectedRevision: 'no_stream' }),
        store.append(s, second, { expectedRevision: 1 }),
        store.append(s, first, { expectedRevision: 'no_stream' }),
        store.append(s, events(1), { expectedRevision: 1 }),
        store.append(t, [second[0]], { expectedRevision: 'no_stream' }),
        store.append(t, events(1), { expectedRevision: 'no_stream' }),
      ]);
      const value = (i: number) => {
        const r = results[i];
        assert.equal(r.status, 'fulfilled', `append ${i}: ${r.status === 'rejected' ? String(r.reason) : ''}`);
        return (r as PromiseFulfilledResult<{ nextRevision: number; position: number }>).value;
      };
      assert.equal(value(0).nextRevision, 1);
      assert.equal(value(1).nextRevision, 2);
      assert.deepEqual(value(2), value(0), 'a repeat within the batch answers with the first result');
      assert.ok(results[3].status === 'rejected' && isWrongExpectedRevision(results[3].reason));
      assert.ok(results[4].status === 'rejected', 'an id written earlier in the batch to another stream');
      await rejectsWithCode(Promise.reject((results[4] as PromiseRejectedResult).reason), 'ES_EVENT_ID_CONFLICT');
      assert.equal(value(5).nextRevision, 0);
      assert.deepEqual(
        (await store.readStream(s)).map((e) => e.id),
        [...first, ...second].map((e) => e.id),
      );
      assert.equal((await store.readStream(t)).length, 1);
    });

    it('keeps every stream gap-free and each append once with 8 writers racing on shared streams', async () => {
      const writers = [store, ...(await Promise.all(Array.from({ length: 7 }, () => sut.open())))];
      const streams = Array.from({ length: 4 }, () => stream('shared'));
      const won = new Map<string, string[]>(streams.map((x) => [x, []]));
      try {
        await Promise.all(
          writers.flatMap((w) =>
            Array.from({ length: 4 }, async () => {
              for (let i = 0; i < 10; i++) {
                const s = streams[i % streams.length];
                const e = events(1);
                const revision = await w.streamRevision(s);
                try {
                  await w.append(s, e, { expectedRevision: revision < 0 ? 'no_stream' : revision });
                  won.get(s)!.push(e[0].id);
                } catch (err) {
                  if (!isWrongExpectedRevision(err)) throw err;
                }
              }
            }),
          ),
        );
      } finally {
        await Promise.all(writers.slice(1).map((w) => w.close()));
      }
      for (const s of streams) {
        const stored = await store.readStream(s);
        assert.deepEqual(
          stored.map((e) => e.revision),
          stored.map((_, i) => i),
        );
        assert.deepEqual(new Set(stored.map((e) => e.id)), new Set(won.get(s)), `${s}: stored = the appends that won`);
        assert.equal(stored.length, won.get(s)!.length);
      }
    });

    it('treats a repeated append of stored events as a no-op with the original result', async () => {
      const s = stream();
      const batch = events(3);
      const original = await store.append(s, batch, { expectedRevision: 'no_stream' });
      const head = await store.headPosition();
      assert.deepEqual(await store.append(s, batch, { expectedRevision: 'no_stream' }), original);
      assert.deepEqual(await store.append(s, batch, { expectedRevision: 'any' }), original);
      const next = await store.append(s, events(1), { expectedRevision: 2 });
      assert.deepEqual(
        await store.append(s, batch, { expectedRevision: 'any' }),
        original,
        'still a repeat after later appends',
      );
      const single = events(1);
      const r = await store.append(s, single, { expectedRevision: 3 });
      assert.deepEqual(await store.append(s, single, { expectedRevision: 3 }), r);
      assert.equal((await store.readStream(s)).length, 5);
      assert.ok(next.position > head);
    });

    it('refuses a partial repeat and ids stored in another stream, writing nothing', async () => {
      const s = stream();
      const batch = events(2);
      await store.append(s, batch, { expectedRevision: 'no_stream' });
      await rejectsWithCode(
        store.append(s, [batch[1], newEvent('Thing', {})], { expectedRevision: 1 }),
        'ES_EVENT_ID_CONFLICT',
      );
      await rejectsWithCode(store.append(s, [batch[1], batch[0]], { expectedRevision: 'any' }), 'ES_EVENT_ID_CONFLICT');
      assert.equal(await store.streamRevision(s), 1);
      if (store.capabilities.globalEventIds) {
        const t = stream();
        await rejectsWithCode(store.append(t, [batch[0]], { expectedRevision: 'no_stream' }), 'ES_EVENT_ID_CONFLICT');
        assert.equal(await store.streamRevision(t), -1);
      }
    });

    it('refuses bad input with a code and writes nothing', async () => {
      const s = stream();
      const ok = newEvent('Thing', {});
      await rejectsWithCode(store.append('', [ok], { expectedRevision: 'any' }), 'ES_INVALID_STREAM_ID');
      await rejectsWithCode(store.append('has space', [ok], { expectedRevision: 'any' }), 'ES_INVALID_STREAM_ID');
      await rejectsWithCode(store.append('$system', [ok], { expectedRevision: 'any' }), 'ES_INVALID_STREAM_ID');
      await rejectsWithCode(store.append(s, [], { expectedRevision: 'any' }), 'ES_EMPTY_APPEND');
      await rejectsWithCode(
        store.append(s, [{ ...ok, id: 'not-a-uuid' }], { expectedRevision: 'any' }),
        'ES_INVALID_EVENT',
      );
      await rejectsWithCode(
        store.append(s, [{ ...ok, id: ok.id.toUpperCase() }], { expectedRevision: 'any' }),
        'ES_INVALID_EVENT',
      );
      await rejectsWithCode(store.append(s, [{ ...ok, type: '' }], { expectedRevision: 'any' }), 'ES_INVALID_EVENT');
      await rejectsWithCode(store.append(s, [{ ...ok, version: 0 }], { expectedRevision: 'any' }), 'ES_INVALID_EVENT');
      await rejectsWithCode(
        store.append(s, [{ ...ok, data: { x: Number.NaN } }], { expectedRevision: 'any' }),
        'ES_INVALID_EVENT',
      );
      await rejectsWithCode(
        store.append(s, [{ ...ok, data: { d: new Date() } as never }], { expectedRevision: 'any' }),
        'ES_INVALID_EVENT',
      );
      await rejectsWithCode(
        store.append(s, [{ ...ok, metadata: { ...ok.metadata, at: '2025-03-01 10:00' } }], { expectedRevision: 'any' }),
        'ES_INVALID_EVENT',
      );
      await rejectsWithCode(
        store.append(s, [{ ...ok, metadata: { ...ok.metadata, actor: '' } }], { expectedRevision: 'any' }),
        'ES_INVALID_EVENT',
      );
      await rejectsWithCode(store.append(s, [ok, ok], { expectedRevision: 'any' }), 'ES_DUPLICATE_EVENT_ID');
      await rejectsWithCode(store.append(s, [ok], { expectedRevision: -1 as never }), 'ES_INVALID_EXPECTED_REVISION');
      await rejectsWithCode(
        store.append(s, [ok], { expectedRevision: 'latest' as never }),
        'ES_INVALID_EXPECTED_REVISION',
      );
      await rejectsWithCode(store.readAll({ limit: 0 }), 'ES_INVALID_READ_OPTIONS');
      await rejectsWithCode(store.readAll({ afterPosition: -1 }), 'ES_INVALID_READ_OPTIONS');
      await rejectsWithCode(store.readStream(s, { fromRevision: 1.5 }), 'ES_INVALID_READ_OPTIONS');
      assert.equal(await store.streamRevision(s), -1);
    });

    it('pages through readAll in global order', async () => {
      const baseline = await store.headPosition();
      const streams = [stream('page'), stream('page'), stream('page')];
      const written: string[] = [];
      for (let i = 0; i < 25; i++) {
        const e = newEvent('Paged', { i });
        written.push(e.id);
        await store.append(streams[i % 3], [e], { expectedRevision: 'any' });
      }
      const paged = await readOwn(store, baseline, prefix, 7);
      assert.deepEqual(
        paged.map((e) => e.id),
        written,
      );
      for (let i = 1; i < paged.length; i++) assert.ok(paged[i].position > paged[i - 1].position);
      if (store.capabilities.contiguousPositions) {
        assert.deepEqual(
          paged.map((e) => e.position),
          paged.map((_, i) => baseline + 1 + i),
        );
      }
      const firstPage = await store.readAll({ afterPosition: baseline, limit: 7 });
      assert.equal(firstPage.length, 7);
      assert.equal(await store.headPosition(), paged[paged.length - 1].position);
    });

    it('subscribes to history then live events without gaps under concurrent appends', async () => {
      const baseline = await store.headPosition();
      const own = `${prefix}sub${++n}-`;
      for (let i = 0; i < 50; i++)
        await store.append(`${own}h${i % 5}`, events(1, 'History'), { expectedRevision: 'any' });
      const seen: StoredEvent[] = [];
      let inFlight = 0;
      let maxInFlight = 0;
      const sub = store.subscribeAll({ afterPosition: baseline, batchSize: 16 }, async (e) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (e.streamId.startsWith(own)) seen.push(e);
        if (seen.length % 10 === 0) await new Promise((r) => setTimeout(r, 1));
        inFlight--;
      });
      const writers = await Promise.all([sut.open(), sut.open(), sut.open(), sut.open()]);
      try {
        await Promise.all(
          writers.map(async (w, k) => {
            for (let i = 0; i < 50; i++)
              await w.append(`${own}w${k}-${i % 3}`, events(i % 4 === 0 ? 2 : 1, 'Live'), { expectedRevision: 'any' });
          }),
        );
        const expected = await readOwn(store, baseline, own);
        assert.equal(expected.length, 50 + 4 * (50 + 13));
        await waitFor(() => seen.length >= expected.length, 'the subscription to deliver every event');
        assert.deepEqual(
          seen.map((e) => e.id),
          expected.map((e) => e.id),
          'delivered in position order, none skipped, none twice',
        );
        assert.equal(maxInFlight, 1, 'the handler is awaited before the next event');
        if (store.capabilities.contiguousPositions) {
          const all = await store.readAll({ afterPosition: baseline, limit: 10_000 });
          assert.deepEqual(
            all.map((e) => e.position),
            all.map((_, i) => baseline + 1 + i),
          );
        }
      } finally {
        await Promise.all(writers.map((w) => w.close()));
        await sub.stop();
      }
      assert.deepEqual(await sub.done, { reason: 'stopped', lastPosition: sub.lastPosition });
    });

    it('resumes a subscription from a checkpoint and reports caughtUp', async () => {
      const baseline = await store.headPosition();
      const s = stream('ckpt');
      for (let i = 0; i < 20; i++)
        await store.append(s, [newEvent('Step', { i })], { expectedRevision: i === 0 ? 'no_stream' : i - 1 });
      const all = await readOwn(store, baseline, s);
      const checkpoint = all[9].position;
      const seen: { i: number; caughtUp: boolean }[] = [];
      const sub = store.subscribeAll({ afterPosition: checkpoint, batchSize: 4 }, (e, info) => {
        if (e.streamId === s) seen.push({ i: (e.data as { i: number }).i, caughtUp: info.caughtUp });
      });
      await waitFor(() => seen.length === 10, 'ten events after the checkpoint');
      assert.deepEqual(
        seen.map((x) => x.i),
        [10, 11, 12, 13, 14, 15, 16, 17, 18, 19],
      );
      assert.equal(seen[9].caughtUp, true, 'the last known event is flagged caughtUp');
      assert.ok(seen.slice(0, 9).every((x) => !x.caughtUp));
      await store.append(s, [newEvent('Step', { i: 20 })], { expectedRevision: 19 });
      await waitFor(() => seen.length === 11, 'a live event');
      assert.deepEqual(seen[10], { i: 20, caughtUp: true });
      await sub.stop();
      const count = seen.length;
      await store.append(s, [newEvent('Step', { i: 21 })], { expectedRevision: 20 });
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(seen.length, count, 'nothing is delivered after stop() resolves');
    });

    it('stops a subscription at an event whose handler throws and reports it', async () => {
      const baseline = await store.headPosition();
      const s = stream('fail');
      for (let i = 0; i < 5; i++) await store.append(s, [newEvent('Step', { i })], { expectedRevision: 'any' });
      const seen: number[] = [];
      let failing: StoredEvent | undefined;
      const sub = store.subscribeAll({ afterPosition: baseline }, (e) => {
        if (e.streamId !== s) return;
        const i = (e.data as { i: number }).i;
        if (i === 3) {
          failing = e;
          throw new Error('boom at 3');
        }
        seen.push(i);
      });
      const end = await sub.done;
      assert.equal(end.reason, 'failed');
      assert.ok(end.reason === 'failed' && end.event?.id === failing?.id);
      assert.ok(end.reason === 'failed' && (end.error as Error).message === 'boom at 3');
      assert.deepEqual(seen, [0, 1, 2]);
      assert.ok(sub.lastPosition < failing!.position, 'the failing event is not counted as handled');
    });

    it('answers audit queries from indexed metadata and refuses the rest', async () => {
      const supported = store.capabilities.queryFilters;
      await rejectsWithCode(store.query({}), 'ES_QUERY_UNFILTERED');
      await rejectsWithCode(store.query({ limit: 10 }), 'ES_QUERY_UNFILTERED');
      await rejectsWithCode(store.query({ requestId: 'r-1' } as never), 'ES_QUERY_FILTER_NOT_INDEXED');
      await rejectsWithCode(store.query({ actor: 'x', 'data.model': 'gpt2' } as never), 'ES_QUERY_FILTER_NOT_INDEXED');
      if (supported.length === 0) {
        await rejectsWithCode(store.query({ actor: 'key:alice' }), 'ES_QUERY_FILTER_NOT_INDEXED');
        return;
      }
      await rejectsWithCode(store.query({ fromAt: 'yesterday' }), 'ES_QUERY_INVALID');
      await rejectsWithCode(store.query({ actor: '' }), 'ES_QUERY_INVALID');
      const q = `${prefix}q${++n}`;
      const corr = `corr-${randomUUID()}`;
      const alice = `key:alice-${randomUUID().slice(0, 6)}`;
      await store.append(
        `${q}-deployment:gpt2`,
        [
          newEvent(
            'DeploymentRequested',
            {},
            { actor: alice, correlationId: corr, causationId: 'cmd-a', at: '2025-03-02T08:00:00.000Z' },
          ),
        ],
        { expectedRevision: 'any' },
      );
      await store.append(
        `${q}-deployment:gpt2`,
        [
          newEvent(
            'ReplicaPlaced',
            {},
            { actor: 'system:scheduler', correlationId: corr, causationId: 'evt-b', at: '2025-03-02T08:00:01.000Z' },
          ),
        ],
        { expectedRevision: 'any' },
      );
      await store.append(
        `${q}-request:r1`,
        [
          newEvent(
            'RequestReceived',
            {},
            { actor: alice, correlationId: `other-${corr}`, causationId: 'cmd-c', at: '2025-03-02T09:00:00.000Z' },
          ),
        ],
        { expectedRevision: 'any' },
      );
      await store.append(
        `${q}-request:r1`,
        [
          newEvent(
            'RequestQueued',
            {},
            {
              actor: 'system:scheduler',
              correlationId: `other-${corr}`,
              causationId: 'cmd-c',
              at: '2025-03-02T09:30:00.000Z',
            },
          ),
        ],
        { expectedRevision: 'any' },
      );
      const types = (r: StoredEvent[]) => r.map((e) => e.type);
      assert.deepEqual(types(await store.query({ actor: alice })), ['DeploymentRequested', 'RequestReceived']);
      assert.deepEqual(types(await store.query({ correlationId: corr })), ['DeploymentRequested', 'ReplicaPlaced']);
      assert.deepEqual(types(await store.query({ causationId: 'cmd-c', streamPrefix: q })), [
        'RequestReceived',
        'RequestQueued',
      ]);
      assert.deepEqual(types(await store.query({ streamPrefix: `${q}-deployment:` })), [
        'DeploymentRequested',
        'ReplicaPlaced',
      ]);
      assert.deepEqual(types(await store.query({ streamPrefix: q, type: 'RequestQueued' })), ['RequestQueued']);
      assert.deepEqual(
        types(
          await store.query({ streamPrefix: q, fromAt: '2025-03-02T08:00:01.000Z', toAt: '2025-03-02T09:30:00.000Z' }),
        ),
        ['ReplicaPlaced', 'RequestReceived'],
        'fromAt inclusive, toAt exclusive',
      );
      const page1 = await store.query({ streamPrefix: q, limit: 3 });
      const page2 = await store.query({ streamPrefix: q, limit: 3, afterPosition: page1[2].position });
      assert.deepEqual(types([...page1, ...page2]), [
        'DeploymentRequested',
        'ReplicaPlaced',
        'RequestReceived',
        'RequestQueued',
      ]);
      assert.deepEqual(await store.query({ actor: `nobody-${randomUUID()}` }), []);
    });

    it('serves commands from an aggregate cache: reads only unfolded events, decides on the latest state across writers, rebuilds after a restart', async () => {
      const s = stream('cached');
      let read = 0;
      // handleCommand reads and appends only; this store counts what it reads.
      const counting = {
        readStream: async (id: string, o?: Parameters<EventStore['readStream']>[1]) => {
          const r = await store.readStream(id, o);
          read += r.length;
          return r;
        },
        append: (id: string, e: NewEvent[], o: Parameters<EventStore['append']>[2]) => store.append(id, e, o),
      } as unknown as EventStore;
      const increment = (cache: AggregateCache<Counter>, commandId: string) =>
        handleCommand(counting, {
          streamId: s,
          command: { commandId, by: 1 },
          decider: counterDecider,
          codec: typeDataCodec<CounterEvent>({ commandId, actor: 'system:test', at: AT }),
          cache,
          maxAttempts: 10,
        });
      const a = new AggregateCache<Counter>();
      const b = new AggregateCache<Counter>();
      for (let i = 0; i < 30; i++) await increment(a, `a-${i}`);
      assert.ok(read <= 1, `30 commands through one cache read ${read} events`);
      // A second writer (another process's cache) folds the stream once, then both interleave.
      read = 0;
      await increment(b, 'b-0');
      assert.equal(read, 30, 'the new cache folds the stream once');
      read = 0;
      for (let i = 1; i <= 10; i++) {
        await increment(a, `a2-${i}`);
        await increment(b, `b-${i}`);
      }
      assert.ok(read <= 40, `each writer read only the other's new events (read ${read})`);
      const all = await store.readStream(s);
      assert.deepEqual(
        all.map((e) => (e.data as { to: number }).to),
        all.map((_, i) => i + 1),
        'no decision on a stale state got in',
      );
      // A redelivered command is stored once even though the cache holds its effect.
      const again = await increment(a, 'a-3');
      assert.equal(again.alreadyStored, true);
      assert.equal((await store.readStream(s)).length, 51);
      // A restart (an empty cache) rebuilds the same state.
      const fresh = new AggregateCache<Counter>();
      const r = await increment(fresh, 'after-restart');
      assert.deepEqual(r.state, { count: 52 });
    });

    it('keeps every event across close and reopen', async () => {
      const s = stream('durable');
      const written = events(5);
      await store.append(s, written, { expectedRevision: 'no_stream' });
      const head = await store.headPosition();
      await store.close();
      await rejectsWithCode(store.readStream(s), 'ES_STORE_CLOSED');
      await store.close();
      store = await sut.open();
      assert.deepEqual(
        (await store.readStream(s)).map((e) => e.id),
        written.map((e) => e.id),
      );
      assert.equal(await store.headPosition(), head);
      const r = await store.append(s, events(1), { expectedRevision: 4 });
      assert.equal(r.nextRevision, 5);
      assert.ok(r.position > head);
    });
  });
}
