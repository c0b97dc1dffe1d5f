// Micro-benchmarks of an event store, shared by `npm run bench -- eventstore` and the control-plane bench:
// append throughput (commands decided and appended through handleCommand), and readAll/subscribe throughput.
import { randomUUID } from 'node:crypto';
import { handleCommand, typeDataCodec, type Decider } from './handle-command.js';
import type { EventStore, NewEvent } from './port.js';

const AT = '2025-03-01T10:00:00.000Z';

function sampleEvent(i: number): NewEvent {
  return {
    id: randomUUID(),
    type: 'RequestQueued',
    version: 1,
    data: { requestId: `req-${i}`, model: 'gpt2-small', rank: 3, enqueuedAt: 1_700_000_000_000 + i, seq: i },
    metadata: { correlationId: `corr-${i >> 2}`, causationId: `cmd-${i}`, actor: 'system:bench', at: AT },
  };
}

/** Appends `count` events in appends of `perAppend`, over `streams` streams; returns the elapsed ms. */
export async function fillStore(
  store: EventStore,
  count: number,
  opts: { perAppend?: number; streams?: number } = {},
): Promise<number> {
  const perAppend = opts.perAppend ?? 500;
  const streams = opts.streams ?? 1000;
  const t = performance.now();
  for (let i = 0; i < count; i += perAppend) {
    const batch = Array.from({ length: Math.min(perAppend, count - i) }, (_, j) => sampleEvent(i + j));
    await store.append(`bench-${(i / perAppend) % streams}`, batch, { expectedRevision: 'any' });
  }
  return performance.now() - t;
}

interface Bump {
  type: 'Bumped';
  data: { to: number };
}
const bumpDecider: Decider<{ commandId: string }, { n: number }, Bump> = {
  initialState: () => ({ n: 0 }),
  evolve: (_s, e) => ({ n: e.data.to }),
  decide: (_c, s) => [{ type: 'Bumped', data: { to: s.n + 1 } }],
};

/**
 * Commands through handleCommand (load stream, fold, decide, append with expected revision), `concurrency` at a
 * time, each on its own new stream unless `streams` caps them. Returns commands per second.
 */
export async function benchCommands(
  store: EventStore,
  opts: { commands?: number; concurrency?: number; streams?: number } = {},
): Promise<number> {
  const commands = opts.commands ?? 10_000;
  const concurrency = opts.concurrency ?? 1;
  const streams = opts.streams ?? Number.MAX_SAFE_INTEGER;
  const run = randomUUID().slice(0, 8);
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < commands; i = next++) {
        const commandId = `${run}-${i}`;
        await handleCommand(store, {
          streamId: `cmd-${run}-${i % streams}`,
          command: { commandId },
          decider: bumpDecider,
          codec: typeDataCodec<Bump>({ commandId, actor: 'system:bench', at: AT }),
          maxAttempts: 100,
        });
      }
    }),
  );
  return (commands / (performance.now() - t)) * 1000;
}

/** Reads the whole log page by page; returns events per second and the count. */
export async function benchReadAll(
  store: EventStore,
  pageSize = 5000,
): Promise<{ eventsPerS: number; events: number }> {
  let events = 0;
  const t = performance.now();
  for (let after = 0; ; ) {
    const page = await store.readAll({ afterPosition: after, limit: pageSize });
    if (page.length === 0) break;
    events += page.length;
    after = page[page.length - 1].position;
  }
  return { eventsPerS: (events / (performance.now() - t)) * 1000, events };
}

/** Subscribes from position 0 until the head is delivered; returns events per second. */
export async function benchSubscribe(store: EventStore, batchSize = 5000): Promise<number> {
  const head = await store.headPosition();
  let events = 0;
  const t = performance.now();
  await new Promise<void>((resolve, reject) => {
    const sub = store.subscribeAll({ afterPosition: 0, batchSize }, (e) => {
      events++;
      if (e.position >= head) void sub.stop().then(resolve);
    });
    void sub.done.then((end) => (end.reason === 'failed' ? reject(end.error) : undefined));
  });
  return (events / (performance.now() - t)) * 1000;
}

/**
 * `writers` concurrent writers, each with its own store (its own connections, as separate processes have), each
 * keeping `inFlight` appends of one event going at once (a command API serving concurrent requests), each append
 * with an expected revision on one of the writer's streams (an append waits for the previous one on its stream),
 * for `durationMs`. Returns appends per second over all writers.
 */
export async function benchConcurrentWriters(
  openStore: () => Promise<EventStore>,
  opts: { writers?: number; inFlight?: number; durationMs?: number } = {},
): Promise<{ appendsPerS: number; appends: number }> {
  const writers = opts.writers ?? 8;
  const inFlight = opts.inFlight ?? 1;
  const durationMs = opts.durationMs ?? 5000;
  const stores = await Promise.all(Array.from({ length: writers }, () => openStore()));
  const run = randomUUID().slice(0, 8);
  let appends = 0;
  try {
    const t = performance.now();
    const end = t + durationMs;
    await Promise.all(
      stores.flatMap((store, w) =>
        Array.from({ length: inFlight }, async (_, lane) => {
          let revision = -1;
          for (let i = 0; performance.now() < end; i++) {
            const r = await store.append(`w-${run}-${w}-${lane}`, [sampleEvent(i)], {
              expectedRevision: revision < 0 ? 'no_stream' : revision,
            });
            revision = r.nextRevision;
            appends++;
          }
        }),
      ),
    );
    return { appendsPerS: (appends / (performance.now() - t)) * 1000, appends };
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
}
