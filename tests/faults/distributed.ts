// Distributed mode for fault tests (the harness parameter's second value): the separate processes of
// docker-compose — scheduler-relay, command API, query API, one GPU agent — over a real PostgreSQL event store (a
// fresh database per fabric) and a real Kafka broker (topics and relay group unique to the fabric), results in a
// files blob store shared on this host. Nothing restarts a dead process here (that is the orchestrator's job), so
// the harness does: a killed agent is started again after 100 ms, like the embedded fabric does; a killed command
// API or scheduler-relay when the test says so. tests/distributed/cluster.ts (the distributed mode's own tests)
// starts the same processes without restarts.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import { COMPRESSED_TIME, type FaultFabric, type FaultFabricOptions } from './fabric.js';
import { agentBack, bootOf } from './http.js';
import { FabricProcess } from './process.js';
import { testCatalogCache } from '../support/catalog-cache.js';

export interface DistributedFaultFabric extends FaultFabric {
  /** kill -9 the scheduler-relay (scheduler, relay, projection); the agent and the APIs stay up. */
  killSchedulerRelay(): Promise<void>;
  restartSchedulerRelay(): Promise<void>;
  /** The projection snapshot the scheduler-relay saved (its `control-plane` checkpoint). */
  snapshot(): Promise<{ position: number; version: number; snapshot?: unknown } | undefined>;
}

export interface DistributedServices {
  databaseUrl: string;
  brokers: string;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function startDistributed(
  services: DistributedServices,
  options: FaultFabricOptions = {},
): Promise<DistributedFaultFabric> {
  const tag = randomBytes(4).toString('hex');
  const db = `ndif_f_${tag}`;
  const admin = new pg.Client({ connectionString: services.databaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${db}`).finally(() => admin.end());
  const eventsUrl = withDatabase(services.databaseUrl, db);
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-faults-dist-'));
  const agentId = 'dist-agent';
  const common: NodeJS.ProcessEnv = {
    ...COMPRESSED_TIME,
    NDIF_MODELS: options.models ? `gpt2-tiny,${options.models}` : 'gpt2-tiny',
    NDIF_CATALOG_CACHE: testCatalogCache(join(tmp, 'catalog')),
    NDIF_BLOB_STORE: 'files',
    NDIF_BLOB_DIR: join(tmp, 'blobs'),
    ...options.env,
  };
  // A 4 s Kafka session (default 10 s): a killed agent or relay gets its partitions back sooner after its restart.
  const kafka: NodeJS.ProcessEnv = {
    NDIF_TRANSPORT: 'kafka',
    KAFKA_BROKERS: services.brokers,
    NDIF_TOPIC_ASSIGNMENTS: `f-${tag}.assignments`,
    NDIF_TOPIC_AGENT_EVENTS: `f-${tag}.agent-events`,
    NDIF_KAFKA_SESSION_TIMEOUT_MS: '4000',
  };
  const controlPlane: NodeJS.ProcessEnv = {
    ...common,
    NDIF_EVENT_STORE: 'postgres',
    DATABASE_URL: eventsUrl,
    NDIF_DATA_DIR: tmp,
    NDIF_AUTH: 'off',
    HOST: '127.0.0.1',
    PORT: '0',
  };
  const env = {
    relay: { ...controlPlane, ...kafka, NDIF_RELAY_GROUP: `relay-${tag}` },
    command: controlPlane,
    query: controlPlane,
    // The agent gets the transport and the blob store only (it drops DATABASE_URL anyway).
    agent: {
      ...common,
      ...kafka,
      DATABASE_URL: '',
      NDIF_AGENT_ID: agentId,
      NDIF_AGENT_GPUS: options.gpus ?? '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
    },
  };
  const start = {
    relay: async () =>
      (await FabricProcess.start('scheduler-relay', 'scheduler-relay', env.relay, /scheduler-relay running/)).proc,
    command: async () =>
      (await FabricProcess.start('command-api', 'command-api', env.command, /command-api listening on (http:\/\/\S+)/))
        .proc,
    query: async () =>
      (await FabricProcess.start('query-api', 'query-api', env.query, /query-api listening on (http:\/\/\S+)/)).proc,
    agent: async () =>
      (await FabricProcess.start('gpu-agent', 'gpu-agent', env.agent, new RegExp(`agent ${agentId} ready boot`))).proc,
  };
  const urlOf = (p: FabricProcess) => /listening on (http:\/\/\S+)/.exec(p.stdout())![1]!;
  const retired: FabricProcess[] = [];
  let relay: FabricProcess | undefined;
  let command: FabricProcess | undefined;
  let query: FabricProcess | undefined;
  let agent: FabricProcess | undefined;
  let agentRestart: Promise<void> | undefined;
  const current = () => [relay, command, query, agent].filter((p): p is FabricProcess => p !== undefined);
  const drop = async () => {
    for (const p of current()) await p.kill9();
    const c = new pg.Client({ connectionString: services.databaseUrl });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).finally(() => c.end());
    rmSync(tmp, { recursive: true, force: true });
  };
  try {
    [relay, command, query] = await Promise.all([start.relay(), start.command(), start.query()]);
    agent = await start.agent();
  } catch (e) {
    await drop().catch(() => undefined);
    throw e;
  }

  const fabric: DistributedFaultFabric = {
    mode: 'distributed',
    get commandUrl() {
      return urlOf(command!);
    },
    get queryUrl() {
      return urlOf(query!);
    },
    agentId,
    operatorHeaders: {},
    keys: new Map(),
    agentPid: () => (agent?.alive ? agent.pid : undefined),
    async killAgent() {
      await agentRestart;
      const a = agent!;
      const bootId = await bootOf(fabric);
      await a.kill9();
      retired.push(a);
      agent = undefined;
      // The orchestrator's part: start it again shortly (a new boot of the same agent).
      agentRestart = (async () => {
        await new Promise((r) => setTimeout(r, 100));
        agent = await start.agent();
      })();
      return { pid: a.pid, bootId };
    },
    freezeAgent() {
      process.kill(agent!.pid, 'SIGSTOP');
    },
    thawAgent() {
      if (agent?.alive) process.kill(agent.pid, 'SIGCONT');
    },
    async agentBack(killed, timeoutMs = 45_000) {
      await agentRestart;
      return agentBack(fabric, killed, timeoutMs);
    },
    async killControlPlane() {
      await command!.kill9();
      retired.push(command!);
    },
    async restartControlPlane() {
      command = await start.command();
    },
    async restartControlPlaneCleanly() {
      await command!.stop();
      retired.push(command!);
      command = await start.command();
    },
    async killSchedulerRelay() {
      await relay!.kill9();
      retired.push(relay!);
    },
    async restartSchedulerRelay() {
      relay = await start.relay();
    },
    async openStore() {
      const store = await PostgresEventStore.open({ connectionString: eventsUrl });
      return { store, close: () => store.close() };
    },
    async snapshot() {
      const store = await PostgresEventStore.open({ connectionString: eventsUrl });
      try {
        return await new PostgresCheckpoints(store.pool, store.schema).load('control-plane');
      } finally {
        await store.close();
      }
    },
    loggedErrors() {
      return [...retired, ...current()].flatMap((p) => p.errors);
    },
    processes: current,
    async stop() {
      await agentRestart;
      const out: Array<{ name: string; code: number | null }> = [];
      for (const p of [agent, query, command, relay])
        if (p !== undefined) out.push({ name: p.name, code: await p.stop() });
      return out;
    },
    async close() {
      await agentRestart?.catch(() => undefined);
      await fabric.stop().catch(() => undefined);
      await drop();
    },
  };
  return fabric;
}
