// handleCommand over a real in-memory SQLite store: decide and append, retry on a concurrent append, give up with
// a code, refuse, and store a redelivered command's events once.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { AggregateCache } from '../../eventstore/aggregate-cache.js';
import { deterministicEventId } from '../../eventstore/event-id.js';
import { handleCommand, typeDataCodec, type Decider } from '../../eventstore/handle-command.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { isFabricError } from '../../protocol/errors.js';
import { counterDecider, type Counter, type CounterEvent, type Increment } from './counter.js';

const AT = '2025-03-01T10:00:00.000Z';
const codecFor = (c: Increment) =>
  typeDataCodec<CounterEvent>({ commandId: c.commandId, actor: 'key:test', at: AT }, { Incremented: 2 });

describe('handleCommand', () => {
  let store: SqliteEventStore;
  beforeEach(() => {
    store = new SqliteEventStore({ path: ':memory:' });
  });
  afterEach(() => store.close());

  const run = (
    command: Increment,
    decider: Decider<Increment, Counter, CounterEvent> = counterDecider,
    maxAttempts?: number,
  ) => handleCommand(store, { streamId: 'counter-1', command, decider, codec: codecFor(command), maxAttempts });

  it('loads, decides and appends with the expected revision, recording metadata and ids from the command', async () => {
    const a = await run({ commandId: 'cmd-a', by: 2 });
    assert.deepEqual([a.state, a.nextRevision, a.attempts, a.alreadyStored], [{ count: 2 }, 0, 1, false]);
    const b = await run({ commandId: 'cmd-b', by: 3 });
    assert.deepEqual([b.state, b.nextRevision], [{ count: 5 }, 1]);
    const stored = await store.readStream('counter-1');
    assert.deepEqual(
      stored.map((e) => e.data),
      [
        { by: 2, to: 2 },
        { by: 3, to: 5 },
      ],
    );
    assert.equal(stored[1].id, deterministicEventId('cmd-b', 0));
    assert.equal(stored[1].version, 2);
    assert.deepEqual(stored[1].metadata, { correlationId: 'cmd-b', causationId: 'cmd-b', actor: 'key:test', at: AT });
    assert.equal(b.position, stored[1].position);
  });

  it('appends nothing when the decider decides nothing', async () => {
    const idle: Decider<Increment, Counter, CounterEvent> = { ...counterDecider, decide: () => [] };
    const r = await run({ commandId: 'cmd-0', by: 1 }, idle);
    assert.deepEqual([r.events, r.nextRevision, r.position], [[], -1, undefined]);
    assert.equal(await store.headPosition(), 0);
  });

  it('passes a refusal through and stores nothing', async () => {
    await run({ commandId: 'cmd-a', by: 2 });
    await assert.rejects(run({ commandId: 'cmd-b', by: 5, max: 4 }), /count would pass 4/);
    assert.equal(await store.streamRevision('counter-1'), 0);
  });

  it('decides again on the new state when another writer appended first', async () => {
    let raced = false;
    const racing: Decider<Increment, Counter, CounterEvent> = {
      ...counterDecider,
      decide(c, s) {
        if (!raced) {
          raced = true;
          // Another writer appends between this handler's load and its append.
          const other = codecFor({ commandId: 'other', by: 10 }).encode(
            { type: 'Incremented', data: { by: 10, to: s.count + 10 } },
            0,
          );
          store.appendSync('counter-1', [other], { expectedRevision: 'any' });
        }
        return counterDecider.decide(c, s);
      },
    };
    const r = await run({ commandId: 'cmd-a', by: 1 }, racing);
    assert.equal(r.attempts, 2);
    assert.deepEqual(r.state, { count: 11 });
    assert.deepEqual(
      (await store.readStream('counter-1')).map((e) => (e.data as { to: number }).to),
      [10, 11],
    );
  });

  it('gives up after maxAttempts conflicts with ES_COMMAND_CONFLICT and stores none of its events', async () => {
    const alwaysRaced: Decider<Increment, Counter, CounterEvent> = {
      ...counterDecider,
      decide(c, s) {
        const other = codecFor({ commandId: randomUUID(), by: 1 });
        store.appendSync('counter-1', [other.encode({ type: 'Incremented', data: { by: 1, to: s.count + 1 } }, 0)], {
          expectedRevision: 'any',
        });
        return counterDecider.decide(c, s);
      },
    };
    const e = await run({ commandId: 'cmd-x', by: 100 }, alwaysRaced, 3).then(
      () => assert.fail('expected ES_COMMAND_CONFLICT'),
      (err: unknown) => err,
    );
    assert.ok(isFabricError(e));
    assert.equal(e.code, 'ES_COMMAND_CONFLICT');
    assert.deepEqual(e.details, { streamId: 'counter-1', attempts: 3 });
    assert.equal(e.httpStatus, 409);
    const stored = await store.readStream('counter-1');
    assert.equal(stored.length, 3, 'only the three racing appends');
    assert.ok(stored.every((s) => (s.data as { by: number }).by === 1));
  });

  it('stores a redelivered command once, even with a decider that would decide it again', async () => {
    const cmd = { commandId: 'cmd-once', by: 4 };
    const first = await run(cmd);
    const again = await run(cmd);
    assert.equal(again.alreadyStored, true);
    assert.equal(again.position, first.position);
    assert.deepEqual(again.state, { count: 4 });
    assert.equal((await store.readStream('counter-1')).length, 1);
  });

  it('rejects a maxAttempts that is not a positive integer', async () => {
    await assert.rejects(run({ commandId: 'c', by: 1 }, counterDecider, 0), TypeError);
  });
});

describe('handleCommand with an aggregate cache', () => {
  let store: SqliteEventStore;
  let read: number;
  let reads: { fromRevision: number | undefined }[];
  let counting: SqliteEventStore;
  beforeEach(() => {
    store = new SqliteEventStore({ path: ':memory:' });
    read = 0;
    reads = [];
    counting = Object.assign(Object.create(store) as SqliteEventStore, {
      readStream: async (id: string, o?: { fromRevision?: number; limit?: number }) => {
        const r = await store.readStream(id, o);
        read += r.length;
        reads.push({ fromRevision: o?.fromRevision });
        return r;
      },
    });
  });
  afterEach(() => store.close());

  const run = (
    cache: AggregateCache<Counter>,
    command: Increment,
    decider: Decider<Increment, Counter, CounterEvent> = counterDecider,
  ) => handleCommand(counting, { streamId: 'counter-1', command, decider, codec: codecFor(command), cache });

  it('decides on the cached state: after the first load a command reads no events, however long the stream', async () => {
    const cache = new AggregateCache<Counter>();
    const bulk = codecFor({ commandId: 'bulk', by: 1 });
    store.appendSync(
      'counter-1',
      Array.from({ length: 5000 }, (_, i) => bulk.encode({ type: 'Incremented', data: { by: 1, to: i + 1 } }, i)),
      { expectedRevision: 'no_stream' },
    );
    await run(cache, { commandId: 'first', by: 1 });
    assert.equal(read, 5000, 'the first command folds the stream once');
    read = 0;
    for (let i = 0; i < 100; i++) await run(cache, { commandId: `c-${i}`, by: 1 });
    assert.equal(read, 0);
    assert.deepEqual(cache.get('counter-1'), { state: { count: 5101 }, revision: 5100 });
    assert.equal(cache.stats.hits, 100);
  });

  it('reads only the events another writer appended after the cached revision, and decides again on them', async () => {
    const cache = new AggregateCache<Counter>();
    for (let i = 0; i < 20; i++) await run(cache, { commandId: `c-${i}`, by: 1 });
    const other = codecFor({ commandId: 'other', by: 10 });
    store.appendSync('counter-1', [other.encode({ type: 'Incremented', data: { by: 10, to: 30 } }, 0)], {
      expectedRevision: 19,
    });
    read = 0;
    const r = await run(cache, { commandId: 'after', by: 1 });
    assert.deepEqual([r.state, r.attempts, read], [{ count: 31 }, 2, 1]);
    assert.equal(reads.at(-1)!.fromRevision, 20);
  });

  it('confirms a refusal or an empty decision on a cached state against newer events before answering', async () => {
    const cache = new AggregateCache<Counter>();
    await run(cache, { commandId: 'c-0', by: 3 });
    const other = codecFor({ commandId: 'other', by: 10 });
    store.appendSync('counter-1', [other.encode({ type: 'Incremented', data: { by: 10, to: 13 } }, 0)], {
      expectedRevision: 0,
    });
    // On the cached count 3 a max of 5 allows +1; on the latest (13) it is refused.
    await assert.rejects(run(cache, { commandId: 'c-1', by: 1, max: 5 }), /count would pass 5/);
    assert.deepEqual(cache.get('counter-1')?.state, { count: 13 });
    const onlyBelow10: Decider<Increment, Counter, CounterEvent> = {
      ...counterDecider,
      decide: (c, s) => (s.count >= 10 ? [] : counterDecider.decide(c, s)),
    };
    store.appendSync(
      'counter-1',
      [codecFor({ commandId: 'o2', by: 1 }).encode({ type: 'Incremented', data: { by: 1, to: 14 } }, 0)],
      { expectedRevision: 1 },
    );
    const idle = await run(cache, { commandId: 'c-2', by: 1 }, onlyBelow10);
    assert.deepEqual([idle.events, idle.nextRevision], [[], 2]);
  });

  it('stores a redelivered command once although the cache already holds its effect', async () => {
    const cache = new AggregateCache<Counter>();
    const first = await run(cache, { commandId: 'once', by: 4 });
    await run(cache, { commandId: 'next', by: 1 });
    const again = await run(cache, { commandId: 'once', by: 4 });
    assert.equal(again.alreadyStored, true);
    assert.equal(again.position, first.position);
    assert.equal((await store.readStream('counter-1')).length, 2);
  });

  it('rebuilds from the stream when the cache is new (a restart) or dropped the stream (least recently used)', async () => {
    const cache = new AggregateCache<Counter>({ maxStreams: 1 });
    for (let i = 0; i < 5; i++) await run(cache, { commandId: `c-${i}`, by: 2 });
    await handleCommand(counting, {
      streamId: 'counter-2',
      command: { commandId: 'x', by: 1 },
      decider: counterDecider,
      codec: codecFor({ commandId: 'x', by: 1 }),
      cache,
    });
    assert.equal(cache.get('counter-1'), undefined, 'the older stream was dropped');
    const r = await run(cache, { commandId: 'c-5', by: 2 });
    assert.deepEqual(r.state, { count: 12 });
    const restarted = await run(new AggregateCache<Counter>(), { commandId: 'c-6', by: 2 });
    assert.deepEqual(r.state, { count: 12 });
    assert.deepEqual(restarted.state, { count: 14 });
  });
});

describe('deterministicEventId', () => {
  it('is a stable lowercase UUID per (command id, index)', () => {
    const a = deterministicEventId('cmd-1', 0);
    assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(deterministicEventId('cmd-1', 0), a);
    assert.notEqual(deterministicEventId('cmd-1', 1), a);
    assert.notEqual(deterministicEventId('cmd-10', 0), deterministicEventId('cmd-1', 10));
  });
});
