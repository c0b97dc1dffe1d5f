// `npm run bench -- control-plane`: the control plane on the embedded SQLite store.
//   enqueue_per_s          SubmitRequest commands validated, decided and appended per second through the command
//                          handlers (64 in flight), on a WAL file store — target >= 5000
//   replay_events_per_s    rebuild of the composite projection (cluster, queue, requests, agents, audit) by the
//                          projection runner (ControlPlaneView) from position 0 over >= 200k events — target >= 100000
//   queue_ops_us_at_10k    one enqueue (RequestQueued) + one dequeue (RequestDispatched) applied to the queue
//                          projection holding 10k queued requests, in µs — target <= 50
// Each rate is the median of --rounds rounds (default 3; every round is printed too), after a warm-up: the machine
// is shared, and one round can land on a burst of other work. `load_avg_1m` is the load when the bench ended.
// Options: --requests N (requests in the replay log, default 29000 ≈ 204k events), --rounds N.
// --tokens: the cost of streamed tokens as events of the requests' streams (docs/events.md, "Streamed tokens"):
//   token_reports_per_s        ReportRequestTokens through the handlers, 16 generating requests back to back,
//                              each stream growing by one event per report (64 per request)
//   enqueue_without_tokens_per_s  an enqueue round of 30k commands on the same store, alone
//   enqueue_with_tokens_per_s  the same round while 16 requests stream tokens as the agent reports them (one
//                              report per request every 50 ms: up to 320 events/s)
//   enqueue_with_per_token_events_per_s  the same with one event per token at 100 tokens/s per request (up to
//                              1600 events/s); token_events_during_* count the token events appended meanwhile
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlaneCommands } from '../command-api/handlers/service.js';
import { domainCodec } from '../command-api/handlers/codec.js';
import { deploymentDecider } from '../domain/deployment/decide.js';
import { GIB } from '../domain/placement/size.js';
import type { RequestCommand } from '../domain/request/commands.js';
import { requestDecider } from '../domain/request/decide.js';
import type { RequestEvent } from '../domain/events/types.js';
import { OrderedQueue } from '../domain/queue/ordered-queue.js';
import { currentVersion } from '../domain/events/registry.js';
import { deterministicEventId } from '../eventstore/event-id.js';
import type { EventStore, JsonValue, StoredEvent } from '../eventstore/port.js';
import { SqliteEventStore } from '../eventstore/sqlite/store.js';
import { ControlPlaneView } from '../projections/control-plane/live.js';
import { SqliteCheckpoints } from '../projections/runner/sqlite-checkpoints.js';
import { benchReplay } from '../projections/runner/benchmark.js';
import { applyQueue } from '../projections/queue/apply.js';
import { initialQueueState } from '../projections/queue/state.js';

const T0 = Date.parse('2025-03-01T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const because = { rule: 'bench', text: 'bench' };

async function benchEnqueue(store: EventStore, commands: number, concurrency: number, first: number): Promise<number> {
  const cp = new ControlPlaneCommands(store);
  let next = first;
  const end = first + commands;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < end; i = next++) {
        await cp.execute(
          {
            type: 'SubmitRequest',
            requestId: `enq-${i}`,
            modelKey: 'gpt2',
            submitter: `key:client${i % 16}`,
            priority: i % 5 === 0,
            trusted: true,
            payload: { prompt: 'The Eiffel Tower is in', invokes: 1 },
          },
          { commandId: `submit-${i}`, actor: `key:client${i % 16}`, at: iso(T0 + i) },
        );
      }
    }),
  );
  return (commands / (performance.now() - t)) * 1000;
}

/** 16 requests dispatched and started on agent a1 (their streams as an agent's reports find them). */
async function startGenerating(cp: ControlPlaneCommands, n: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = `gen-${tag}-${i}`;
    const meta = (c: string) => ({ commandId: `${c}-${id}`, actor: 'system:scheduler', at: iso(T0) });
    await cp.execute(
      {
        type: 'SubmitRequest',
        requestId: id,
        modelKey: 'gpt2',
        submitter: 'key:client0',
        priority: false,
        trusted: true,
        payload: { prompt: 'x' },
      },
      meta('s'),
    );
    await cp.execute(
      { type: 'DispatchRequest', requestId: id, attempt: 1, replicaId: 'gpt2#1', agentId: 'a1', because },
      meta('d'),
    );
    await cp.execute(
      { type: 'ReportRequestStarted', requestId: id, attempt: 1, agentId: 'a1', agentMessageId: `${id}-start` },
      meta('r'),
    );
    ids.push(id);
  }
  return ids;
}

function tokenReport(id: string, n: number, step0: number, perReport: number) {
  return {
    type: 'ReportRequestTokens' as const,
    requestId: id,
    attempt: 1,
    agentId: 'a1',
    agentMessageId: `${id}-t${n}`,
    tokens: Array.from({ length: perReport }, (_, k) => ({ step: step0 + k, invoke: 0, token: 318 + k, text: ' is' })),
  };
}

/** ReportRequestTokens appended back to back for 16 generating requests (64 reports each): reports per second. */
async function benchTokenReports(store: EventStore): Promise<number> {
  const cp = new ControlPlaneCommands(store);
  const ids = await startGenerating(cp, 16, 'burst');
  const t = performance.now();
  await Promise.all(
    ids.map(async (id) => {
      for (let n = 0; n < 64; n++)
        await cp.execute(tokenReport(id, n, n, 1), {
          commandId: `agent:a1:${id}-t${n}`,
          actor: 'agent:a1',
          at: iso(T0 + n),
        });
    }),
  );
  return ((16 * 64) / (performance.now() - t)) * 1000;
}

/** Commands of one enqueue round in the token measurement: long enough (~2 s) for the streams to reach their rate. */
const TOKEN_ROUND = 30_000;

/** The enqueue round while 16 requests stream tokens: a report per request every `everyMs`, carrying `perReport` tokens. */
async function benchEnqueueWithTokens(
  store: EventStore,
  first: number,
  everyMs: number,
  perReport: number,
  tag: string,
): Promise<{ enqueuePerS: number; tokenEvents: number }> {
  const cp = new ControlPlaneCommands(store);
  const ids = await startGenerating(cp, 16, tag);
  let stop = false;
  let events = 0;
  // The SQLite store answers synchronously, so the enqueue round never yields to timers: the streams poll the clock
  // between microtasks instead, and report when their next report is due.
  const streams = ids.map(async (id, k) => {
    let due = performance.now() + (everyMs * k) / ids.length;
    for (let n = 0; !stop; ) {
      if (performance.now() < due) {
        await Promise.resolve();
        continue;
      }
      await cp.execute(tokenReport(id, n, n * perReport, perReport), {
        commandId: `agent:a1:${id}-t${n}`,
        actor: 'agent:a1',
        at: iso(T0 + n),
      });
      events++;
      n++;
      due += everyMs;
    }
  });
  const enqueuePerS = await benchEnqueue(store, TOKEN_ROUND, 64, first);
  stop = true;
  await Promise.all(streams);
  return { enqueuePerS, tokenEvents: events };
}

/** Appends a realistic log: per request received, queued, dispatched, started, two log lines, completed (or a requeue). */
export async function fillControlPlaneLog(store: EventStore, requests: number): Promise<number> {
  const deploy = deploymentDecider.decide(
    {
      type: 'RequestDeployment',
      modelKey: 'gpt2',
      settings: { weightsBytes: GIB },
      replicas: 4,
      onDemand: false,
      at: iso(T0),
    },
    deploymentDecider.initialState(),
  );
  await store.append(
    'deployment-gpt2',
    deploy.map((e, i) => domainCodec({ commandId: 'bench-deploy', actor: 'op', at: iso(T0) }).encode(e, i)),
    { expectedRevision: 'any' },
  );
  let next = 0;
  await Promise.all(
    Array.from({ length: 128 }, async () => {
      for (let i = next++; i < requests; i = next++) {
        const at = iso(T0 + i * 10);
        const id = `req-${i}`;
        let state = requestDecider.initialState();
        const events: { e: RequestEvent; commandId: string }[] = [];
        const step = (c: RequestCommand, commandId: string) => {
          for (const e of requestDecider.decide(c, state)) {
            events.push({ e, commandId });
            state = requestDecider.evolve(state, e);
          }
        };
        const replicaId = `gpt2#${1 + (i % 4)}`;
        const report = { requestId: id, agentId: 'a1', at };
        step(
          {
            type: 'SubmitRequest',
            requestId: id,
            modelKey: 'gpt2',
            submitter: `key:client${i % 16}`,
            priority: i % 5 === 0,
            trusted: true,
            payload: { prompt: 'x' },
            at,
          },
          `s-${i}`,
        );
        step({ type: 'DispatchRequest', requestId: id, attempt: 1, replicaId, agentId: 'a1', at, because }, `d-${i}`);
        if (i % 50 === 0) {
          step({ type: 'RequeueRequest', requestId: id, attempt: 1, reason: 'PREEMPTED', at, because }, `q-${i}`);
          step(
            { type: 'DispatchRequest', requestId: id, attempt: 2, replicaId, agentId: 'a1', at, because },
            `d2-${i}`,
          );
        }
        const attempt = state.attempt;
        step({ type: 'ReportRequestStarted', attempt, agentMessageId: `m0-${i}`, ...report }, `a0-${i}`);
        step(
          {
            type: 'ReportRequestLog',
            attempt,
            agentMessageId: `m1-${i}`,
            lines: [{ stream: 'stdout', line: 'tensor([1, 768])' }],
            ...report,
          },
          `a1-${i}`,
        );
        step(
          {
            type: 'ReportRequestLog',
            attempt,
            agentMessageId: `m2-${i}`,
            lines: [{ stream: 'stdout', line: 'done' }],
            ...report,
          },
          `a2-${i}`,
        );
        step(
          {
            type: 'ReportRequestCompleted',
            attempt,
            agentMessageId: `m3-${i}`,
            resultRef: `blob:${id}`,
            bytes: 3072,
            sha256: 'ab'.repeat(32),
            ...report,
          },
          `a3-${i}`,
        );
        const byCommand = new Map<string, number>();
        const encoded = events.map(({ e, commandId }) => {
          const index = byCommand.get(commandId) ?? 0;
          byCommand.set(commandId, index + 1);
          // The events come from the real deciders; the bench skips only the schema check of the codec.
          return {
            id: deterministicEventId(commandId, index),
            type: e.type,
            version: currentVersion(e.type),
            data: e.data as JsonValue,
            metadata: {
              correlationId: `s-${i}`,
              causationId: commandId,
              actor: commandId.startsWith('s-')
                ? `key:client${i % 16}`
                : commandId.startsWith('a')
                  ? 'agent:a1'
                  : 'system:scheduler',
              at,
            },
          };
        });
        await store.append(`request-${id}`, encoded, { expectedRevision: 'no_stream' });
      }
    }),
  );
  return store.headPosition();
}

/**
 * Rebuild of the control plane's read models as the fabric runs it: a ControlPlaneView (the projection runner over
 * the composite projection, checkpoints in the store's file) starting from position 0, until it has applied the head.
 */
async function benchRebuild(store: SqliteEventStore): Promise<{ eventsPerS: number; requests: number }> {
  const head = await store.headPosition();
  const checkpoints = new SqliteCheckpoints(store.db);
  // The previous round's final snapshot would let the view skip the log: every round rebuilds from nothing.
  store.db.prepare(`DELETE FROM projection_checkpoints WHERE name = 'control-plane'`).run();
  const view = new ControlPlaneView(store, checkpoints);
  const t = performance.now();
  await view.start();
  await view.waitForPosition(head, 120_000);
  const ms = performance.now() - t;
  const status = view.status();
  const requests = view.state.requests.byId.size;
  await view.stop();
  if (status.rebuiltBecause !== 'no-checkpoint')
    throw new Error(`the view did not rebuild from 0 (${status.rebuiltBecause})`);
  return { eventsPerS: (status.eventsApplied / ms) * 1000, requests };
}

/** Enqueue + dequeue on the queue projection holding `depth` queued requests: µs per pair. */
function benchQueueProjection(depth: number, pairs: number): number {
  const s = initialQueueState();
  let position = 0;
  const ev = (type: string, data: unknown): StoredEvent => ({
    id: '00000000-0000-5000-8000-000000000000',
    type,
    version: 1,
    data: data as never,
    metadata: { correlationId: 'c', causationId: 'c', actor: 'bench', at: iso(T0) },
    streamId: 'request-x',
    revision: 0,
    position: ++position,
  });
  const queued = (i: number) =>
    ev('RequestQueued', { requestId: `q${i}`, modelKey: 'gpt2', rank: i % 5 === 0 ? 1 : 3, enqueuedAt: iso(T0 + i) });
  for (let i = 0; i < depth; i++) applyQueue(s, queued(i));
  const q = s.byModel.get('gpt2')!;
  const enq: StoredEvent[] = [];
  const deq: StoredEvent[] = [];
  for (let i = 0; i < pairs; i++) enq.push(queued(depth + i));
  const t = performance.now();
  for (let i = 0; i < pairs; i++) {
    applyQueue(s, enq[i]);
    const head = q.peek()!;
    deq.push(ev('RequestDispatched', { requestId: head.id }));
    applyQueue(s, deq[deq.length - 1]);
  }
  const us = ((performance.now() - t) * 1000) / pairs;
  if (q.size !== depth) throw new Error(`queue depth drifted to ${q.size}`);
  return us;
}

/** The same on the bare order-statistic tree, with a position lookup per pair. */
function benchQueueTree(depth: number, pairs: number): number {
  const q = new OrderedQueue<null>();
  for (let i = 0; i < depth; i++) q.enqueue(`q${i}`, { rank: i % 4, enqueuedAtMs: T0 + i, seq: i }, null);
  const t = performance.now();
  for (let i = 0; i < pairs; i++) {
    q.enqueue(`n${i}`, { rank: i % 4, enqueuedAtMs: T0 + depth + i, seq: depth + i }, null);
    q.position(`n${i}`);
    q.dequeue();
  }
  return ((performance.now() - t) * 1000) / pairs;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const option = (name: string, fallback: number) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  const requests = option('--requests', 29_000);
  const rounds = option('--rounds', 3);
  if (!Number.isSafeInteger(rounds) || rounds < 1)
    throw new Error(`--rounds must be a positive integer, got ${rounds}`);
  const dir = mkdtempSync(join(tmpdir(), 'ndif-bench-cp-'));
  try {
    const result: Record<string, unknown> = {};
    const started = performance.now();
    const store = new SqliteEventStore({ path: join(dir, 'events.db') });
    await benchEnqueue(store, 2_000, 64, 0); // warm-up
    // Rounds of 10k on the same file: the median round runs on a log of 12k–22k commands, as one round of 20k would.
    const enqueue: number[] = [];
    for (let r = 0; r < rounds; r++)
      enqueue.push(Math.round(await benchEnqueue(store, 10_000, 64, 2_000 + r * 10_000)));
    result.enqueue_per_s = median(enqueue);
    result.enqueue_rounds_per_s = enqueue;
    if (args.includes('--tokens')) {
      result.token_reports_per_s = Math.round(await benchTokenReports(store));
      result.enqueue_without_tokens_per_s = Math.round(await benchEnqueue(store, TOKEN_ROUND, 64, 50_000));
      const batched = await benchEnqueueWithTokens(store, 100_000, 50, 3, 'batched');
      result.enqueue_with_tokens_per_s = Math.round(batched.enqueuePerS);
      result.token_events_during_batched = batched.tokenEvents;
      const perToken = await benchEnqueueWithTokens(store, 200_000, 10, 1, 'per-token');
      result.enqueue_with_per_token_events_per_s = Math.round(perToken.enqueuePerS);
      result.token_events_during_per_token = perToken.tokenEvents;
      if (args.includes('--tokens-only')) {
        await store.close();
        result.elapsed_s = Number(((performance.now() - started) / 1000).toFixed(1));
        result.load_avg_1m = Number(loadavg()[0].toFixed(2));
        return result;
      }
    }
    await store.close();

    const replayStore = new SqliteEventStore({ path: join(dir, 'replay.db') });
    const t = performance.now();
    const events = await fillControlPlaneLog(replayStore, requests);
    result.replay_log_events = events;
    result.replay_log_fill_s = Number(((performance.now() - t) / 1000).toFixed(1));
    // The runner over the same log with a projection that does nothing: the bound the store's read path sets.
    result.replay_read_only_events_per_s = Math.round(
      (await benchReplay(replayStore, { name: 'noop', version: 1, initialState: () => 0, apply: (n: number) => n + 1 }))
        .eventsPerS,
    );
    const replays: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const replay = await benchRebuild(replayStore);
      if (replay.requests !== requests)
        throw new Error(`the rebuilt view holds ${replay.requests} requests, the log ${requests}`);
      replays.push(Math.round(replay.eventsPerS));
    }
    result.replay_events_per_s = median(replays);
    result.replay_rounds_events_per_s = replays;
    result.replay_requests = requests;
    await replayStore.close();

    benchQueueProjection(10_000, 20_000);
    result.queue_ops_us_at_10k = Number(benchQueueProjection(10_000, 100_000).toFixed(2));
    result.queue_tree_ops_us_at_10k = Number(benchQueueTree(10_000, 200_000).toFixed(2));
    result.elapsed_s = Number(((performance.now() - started) / 1000).toFixed(1));
    result.load_avg_1m = Number(loadavg()[0].toFixed(2));
    return result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
