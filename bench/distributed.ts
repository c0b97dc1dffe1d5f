// `npm run bench -- distributed [--model M] [--rounds N] [--layer L] [--tokens T] [--requests K] [--budget-ms B]`:
// distributed mode against embedded mode, and the relay's rate.
//   kafka_over_inproc  median end-to-end latency of the same request (a block reading and returning
//                      transformer.h[L].output, T prompt tokens) through the SDK on distributed mode's processes
//                      (gateway, command API, query API on PostgreSQL read models, scheduler-relay, one GPU agent;
//                      Kafka between the scheduler-relay and the agent; event store and blobs in PostgreSQL) over the
//                      same on the embedded fabric (`npm start`'s two processes, SQLite, IPC transport); rounds
//                      interleave the two after a warm-up
//   relay_events_per_s the assignment relay catching up a PostgreSQL log of K request lifecycles (the events the
//                      distributed rounds recorded, copied under new request ids) and publishing every assignment
//                      (K runs) to Kafka: events read, routed and published per second
//   pg_appends_per_s_8_writers  appends of one event with an expected revision per second into the PostgreSQL
//                      event store by 8 writers, each its own store and connection pool (as 8 processes), each
//                      keeping 32 appends in flight (a command API serving concurrent requests); _8_serial_writers:
//                      the same with one append in flight each. `--only pg-writers` measures just these.
// The model defaults to gpt2-small-random (GPT-2 small's shape, ~180 ms a forward on these cores), as in the e2e
// bench: a request's compute then is what a user waits for, and the ratio says what the distributed hops add to it.
// On gpt2-tiny (~1 ms a forward) the fixed costs of the hops would be nearly the whole latency in both modes.
// PostgreSQL and Kafka are started through scripts/services when DATABASE_URL / KAFKA_BROKERS are not given; their
// startup, the processes' start and the model loads are reported separately and are not in the ratios.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import type { StatusMessage } from '../client/sdk/wire.js';
import { FileBlobStore } from '../blobstore/files.js';
import { benchConcurrentWriters } from '../eventstore/benchmark.js';
import type { NewEvent, StoredEvent } from '../eventstore/port.js';
import { PostgresEventStore } from '../eventstore/postgres/store.js';
import { PostgresCheckpoints } from '../projections/runner/postgres-checkpoints.js';
import { ensureModel } from '../catalog/bundled/generate-model.js';
import { KafkaTransport } from '../transport/kafka/transport.js';
import { AssignmentRelay } from '../transport/relay/assignment-relay.js';
import { startCluster, type Cluster } from '../tests/distributed/cluster.js';
import { startProcess, type FabricProcess } from '../tests/fabric/processes.js';

const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';

function arg(args: string[], name: string, fallback: number): number;
function arg(args: string[], name: string, fallback: string): string;
function arg(args: string[], name: string, fallback: number | string): number | string {
  const i = args.indexOf(`--${name}`);
  if (i < 0 || args[i + 1] === undefined) return fallback;
  return typeof fallback === 'number' ? Number(args[i + 1]) : args[i + 1]!;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
};
const round2 = (x: number) => Number(x.toFixed(2));
const seconds = (t: number) => round2((performance.now() - t) / 1000);

interface ServicesHandle {
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** DATABASE_URL and KAFKA_BROKERS as given, or PostgreSQL and Kafka started through scripts/services. */
async function services(): Promise<{
  databaseUrl: string;
  brokers: string;
  startS: number;
  started: string[];
  stop: () => Promise<void>;
}> {
  const given = { databaseUrl: process.env.DATABASE_URL, brokers: process.env.KAFKA_BROKERS };
  if (given.databaseUrl && given.brokers)
    return {
      databaseUrl: given.databaseUrl,
      brokers: given.brokers,
      startS: 0,
      started: [],
      stop: async () => undefined,
    };
  const t = performance.now();
  const started = [!given.databaseUrl ? 'postgres' : '', !given.brokers ? 'kafka' : ''].filter(Boolean);
  const previous = process.env.NDIF_SERVICES;
  process.env.NDIF_SERVICES = started.join(',');
  const mod = (await import(new URL('../../scripts/services/index.mjs', import.meta.url).href)) as {
    startServices(o: { fullRun: boolean }): Promise<ServicesHandle>;
  };
  const s = await mod.startServices({ fullRun: false });
  if (previous === undefined) delete process.env.NDIF_SERVICES;
  else process.env.NDIF_SERVICES = previous;
  return {
    databaseUrl: given.databaseUrl || s.env.DATABASE_URL!,
    brokers: given.brokers || s.env.KAFKA_BROKERS!,
    startS: seconds(t),
    started,
    stop: () => s.stop(),
  };
}

/**
 * Round trips through the broker before anything is timed: a broker just started (its JVM not yet compiled its hot
 * paths) answers several times slower for its first few thousand requests.
 */
async function warmKafka(brokers: string): Promise<number> {
  const t = performance.now();
  const transport = await KafkaTransport.connect({ brokers: brokers.split(','), clientId: 'bench-warm-up' });
  try {
    const topic = `bench-warm-${randomUUID().slice(0, 8)}`;
    let arrived: (() => void) | undefined;
    let n = 0;
    const sub = await transport.subscribe(topic, `g-${topic}`, async () => {
      n++;
      arrived?.();
    });
    const value = Buffer.alloc(300, 1);
    let sent = 0;
    for (; sent < 300 && performance.now() - t < 3000; sent++) {
      const got = new Promise<void>((r) => (arrived = r));
      await transport.publish(topic, { key: `k${sent % 4}`, value });
      await got;
    }
    await Promise.all(Array.from({ length: 1000 }, (_, i) => transport.publish(topic, { key: `k${i % 4}`, value })));
    sent += 1000;
    const end = Date.now() + 3000;
    while (n < sent && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    await sub.close();
  } finally {
    await transport.close();
  }
  return seconds(t);
}

/** Copies of the request streams in `log` under new request ids: `copies` lifecycles with the live run's events. */
function requestCopies(log: StoredEvent[], copies: number): Array<{ streamId: string; events: NewEvent[] }> {
  const byStream = new Map<string, StoredEvent[]>();
  for (const e of log) {
    if (!e.streamId.startsWith('request-')) continue;
    const list = byStream.get(e.streamId);
    if (list === undefined) byStream.set(e.streamId, [e]);
    else list.push(e);
  }
  const completed = [...byStream.values()].filter((es) => es.some((e) => e.type === 'RequestCompleted'));
  if (completed.length === 0) throw new Error('the distributed rounds recorded no completed request');
  return Array.from({ length: copies }, (_, i) => {
    const src = completed[i % completed.length]!;
    const requestId = `relay-bench-${i}`;
    return {
      streamId: `request-${requestId}`,
      events: src.map((e) => ({
        id: randomUUID(),
        type: e.type,
        version: e.version,
        data: { ...(e.data as Record<string, unknown>), requestId } as NewEvent['data'],
        metadata: e.metadata,
      })),
    };
  });
}

/**
 * The relay's catch-up rate: a fresh PostgreSQL store holding the live run's agent and replica events and `copies`
 * request lifecycles; an AssignmentRelay with no checkpoint reads it from position 0 and publishes every
 * assignment to a fresh Kafka topic.
 */
/** Group commit: appends per second by 8 writers (own pools) into a fresh schema, with 32 and 1 in flight each. */
async function pgWriters(databaseUrl: string): Promise<Record<string, number>> {
  const schema = `bench_writers_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const open = () => PostgresEventStore.open({ connectionString: databaseUrl, schema, poolSize: 2 });
  await (await open()).close();
  const deep = await benchConcurrentWriters(open, { writers: 8, inFlight: 32, durationMs: 8000 });
  const serial = await benchConcurrentWriters(open, { writers: 8, inFlight: 1, durationMs: 5000 });
  const admin = await PostgresEventStore.open({ connectionString: databaseUrl, schema: 'public' });
  try {
    await admin.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.close();
  }
  return {
    pg_appends_per_s_8_writers: Math.round(deep.appendsPerS),
    pg_appends_per_s_8_serial_writers: Math.round(serial.appendsPerS),
  };
}

async function relayRate(c: Cluster, brokers: string, copies: number): Promise<Record<string, number>> {
  const source = await PostgresEventStore.open({ connectionString: c.eventsUrl });
  const schema = `relay_bench_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
  const store = await PostgresEventStore.open({ connectionString: c.eventsUrl, schema });
  const transport = await KafkaTransport.connect({ brokers: brokers.split(','), clientId: 'bench-relay' });
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-relay-'));
  const blobs = await FileBlobStore.open({ dir: tmp, sync: false });
  try {
    const log: StoredEvent[] = [];
    for (let after = 0; ; ) {
      const page = await source.readAll({ afterPosition: after, limit: 10_000 });
      if (page.length === 0) break;
      log.push(...page);
      after = page[page.length - 1]!.position;
    }
    const tw = performance.now();
    for (const e of log.filter((x) => !x.streamId.startsWith('request-')))
      await store.append(
        e.streamId,
        [{ id: e.id, type: e.type, version: e.version, data: e.data, metadata: e.metadata }],
        { expectedRevision: 'any' },
      );
    const streams = requestCopies(log, copies);
    // All at once: the store sends queued appends together (up to 256 per es_append call).
    await Promise.all(streams.map((s) => store.append(s.streamId, s.events, { expectedRevision: 'no_stream' })));
    const writeS = seconds(tw);
    const head = await store.headPosition();
    const topic = `bench-relay-${schema}`;
    await transport.publish(topic, { key: 'warm-up', value: Buffer.from('{}') });
    const relay = new AssignmentRelay({
      store,
      snapshots: new PostgresCheckpoints(store.pool, schema),
      transport,
      blobs,
      log: pino({ level: 'warn' }),
      topic,
    });
    const t = performance.now();
    await relay.start();
    await relay.waitForPosition(head, 60_000);
    const ms = performance.now() - t;
    const published = relay.status().published;
    await relay.stop();
    return {
      events: head,
      assignments: published,
      seconds: round2(ms / 1000),
      events_per_s: Math.round((head / ms) * 1000),
      assignments_per_s: Math.round((published / ms) * 1000),
      write_s: writeS,
    };
  } finally {
    await transport.close();
    await blobs.close();
    await store.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await store.close();
    await source.close();
    rmSync(tmp, { recursive: true, force: true });
  }
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const model = arg(args, 'model', 'gpt2-small-random');
  const rounds = arg(args, 'rounds', 12);
  const layer = arg(args, 'layer', 6);
  const promptTokens = arg(args, 'tokens', 32);
  const copies = arg(args, 'requests', 1500);
  const budgetMs = arg(args, 'budget-ms', 10_000);
  /** on: the query API serves from the PostgreSQL read models (distributed mode's default); off: from its view. */
  const readModels = arg(args, 'read-models', 'on') === 'on';
  /** PostgreSQL synchronous_commit of the fabric's connections: on (the server default, a WAL flush per commit). */
  const synchronousCommit = arg(args, 'synchronous-commit', 'on') as 'on' | 'off';

  const svc = await services();
  if (svc.started.length > 0) process.stderr.write(`services ${svc.started.join(', ')} up in ${svc.startS} s\n`);
  if (arg(args, 'only', '') === 'pg-writers') {
    try {
      return { bench: 'distributed', ...(await pgWriters(svc.databaseUrl)) };
    } finally {
      await svc.stop();
    }
  }
  const t0 = performance.now();
  const kafkaWarmS = await warmKafka(svc.brokers);
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-dist-'));
  let cluster: Cluster | undefined;
  let embedded: FabricProcess | undefined;
  const sdks: Fabric[] = [];
  try {
    ensureModel(model);
    const ts = performance.now();
    const [c, e] = await Promise.all([
      startCluster({
        databaseUrl: svc.databaseUrl,
        brokers: svc.brokers,
        models: model,
        agents: [{ id: 'bench-agent', gpus: '1x16GiB' }],
        agentEnv: { NDIF_AGENT_RAM: '8GiB' },
        readModels,
        synchronousCommit,
      }),
      startProcess(
        'embedded/main',
        {
          NDIF_PORT: '0',
          NDIF_DATA_DIR: join(tmp, 'embedded'),
          NDIF_MODELS: model,
          NDIF_AGENT_GPUS: '1x16GiB',
          NDIF_AGENT_RAM: '8GiB',
          NDIF_CATALOG_CACHE: join(tmp, 'catalog'),
        },
        /NDIF fabric listening on (http:\/\/\S+)/,
        120_000,
      ),
    ]);
    cluster = c;
    embedded = e;
    const startS = seconds(ts);
    const dist = new Fabric({ url: cluster.url, progress: false, onLog: null });
    const emb = new Fabric({ url: embedded.match[1]!, progress: false, onLog: null });
    sdks.push(dist, emb);
    const td = performance.now();
    await Promise.all(
      [dist, emb].map(async (f) => {
        const admin = new FabricAdmin(f.http);
        const d = await admin.deploy({ model });
        await waitForHot(admin, model, d.replicaIds, {
          waitMs: 90_000,
          signal: new AbortController().signal,
          pollMs: 100,
        });
      }),
    );
    const deployS = seconds(td);
    const tokens = Array.from(new TextEncoder().encode(TEXT))
      .slice(0, promptTokens)
      .map((b) => 200 + b);
    const block = `async (m) => await m.transformer.h[${layer}].output`;
    const once = (f: Fabric, onMessage?: (m: StatusMessage) => void) =>
      f.trace(model, tokens, block, onMessage ? { onMessage } : {});
    const tw = performance.now();
    for (let i = 0; i < 4; i++) await Promise.all([once(dist), once(emb)]);
    const warmS = seconds(tw);

    const times = { dist: [] as number[], emb: [] as number[] };
    const phases: Record<'dist' | 'emb', Record<string, number[]>> = { dist: {}, emb: {} };
    const tm = performance.now();
    let done = 0;
    for (let r = 0; r < rounds; r++) {
      for (const which of r % 2 ? (['dist', 'emb'] as const) : (['emb', 'dist'] as const)) {
        const at: Record<string, number> = {};
        const s = performance.now();
        const s0 = Date.now();
        await once(which === 'dist' ? dist : emb, (m) => {
          at[m.status] ??= Date.parse(m.at);
          if (m.status === 'COMPLETED') at.arrived = Date.now();
        });
        const end = Date.now();
        times[which].push(performance.now() - s);
        const p = phases[which];
        const push = (k: string, v: number) => {
          p[k] ??= [];
          p[k].push(v);
        };
        push('submit', at.RECEIVED! - s0);
        push('schedule', at.DISPATCHED! - at.RECEIVED!);
        push('start', at.RUNNING! - at.DISPATCHED!);
        push('run', at.COMPLETED! - at.RUNNING!);
        push('notify', at.arrived! - at.COMPLETED!);
        push('result', end - at.arrived!);
      }
      done++;
      if (performance.now() - tm > budgetMs) break;
    }
    const distMs = median(times.dist);
    const embMs = median(times.emb);
    const phaseMedians = (w: 'dist' | 'emb') =>
      Object.fromEntries(Object.entries(phases[w]).map(([k, v]) => [k, round2(median(v))]));

    const relay = await relayRate(cluster, svc.brokers, copies);
    const writers = await pgWriters(svc.databaseUrl);
    return {
      bench: 'distributed',
      model,
      prompt_tokens: tokens.length,
      layer,
      rounds: done,
      read_models: readModels,
      synchronous_commit: synchronousCommit,
      kafka_over_inproc: Number((distMs / embMs).toFixed(4)),
      relay_events_per_s: relay.events_per_s,
      ...writers,
      distributed_ms: round2(distMs),
      embedded_ms: round2(embMs),
      added_ms: round2(distMs - embMs),
      distributed_min_ms: round2(Math.min(...times.dist)),
      embedded_min_ms: round2(Math.min(...times.emb)),
      // submit: call → RECEIVED recorded; schedule: → DISPATCHED; start: → RUNNING (relay, transport, agent);
      // run: → COMPLETED recorded (forward, result blob, report back); notify: → COMPLETED on the client's
      // websocket; result: → value decoded (statuses' `at` are the fabric's clock, this machine's).
      distributed_phases_ms: phaseMedians('dist'),
      embedded_phases_ms: phaseMedians('emb'),
      relay: {
        events: relay.events,
        assignments: relay.assignments,
        seconds: relay.seconds,
        assignments_per_s: relay.assignments_per_s,
        log_write_s: relay.write_s,
      },
      services_start_s: svc.startS,
      services_started: svc.started,
      processes_start_s: startS,
      cluster_start_s: round2(cluster.startS),
      deploy_s: deployS,
      warmup_s: warmS,
      kafka_warmup_s: kafkaWarmS,
      total_s: seconds(t0),
    };
  } finally {
    for (const s of sdks) s.close();
    await cluster?.stop().catch((e: unknown) => process.stderr.write(`cluster stop: ${String(e)}\n`));
    await embedded?.stop();
    rmSync(tmp, { recursive: true, force: true });
    await svc.stop();
  }
}
