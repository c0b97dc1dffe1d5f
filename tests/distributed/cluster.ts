// Distributed mode as separate OS processes (dist/fabric/*.js), as docker-compose runs it: scheduler-relay,
// command API, query API (PostgreSQL read models), the gateway in front of both APIs, and N GPU agents, over a
// real Kafka broker (topics and relay group unique to this cluster) and a real PostgreSQL server: a fresh database
// for the event store, read models, checkpoints and API keys, and a separate blob database owned by its own role
// — the only database the agents are given (BLOB_DATABASE_URL; the event-store database refuses that role). Used by
// the distributed tests and `npm run bench -- distributed`.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { getJson, startProcess, type FabricProcess } from '../fabric/processes.js';
import { testCatalogCache } from '../support/catalog-cache.js';

export interface ClusterAgent {
  id: string;
  /** NDIF_AGENT_GPUS, e.g. 2x1GiB. */
  gpus: string;
}

export interface ClusterOptions {
  /** An administrator's connection to the PostgreSQL server (creates and drops the cluster's databases). */
  databaseUrl: string;
  brokers: string;
  /** NDIF_MODELS of every process. */
  models: string;
  agents: ClusterAgent[];
  /** Extra environment for every process. */
  env?: NodeJS.ProcessEnv;
  /** Extra environment for the agents. */
  agentEnv?: NodeJS.ProcessEnv;
  /** The query API on the PostgreSQL read models (default true). */
  readModels?: boolean;
  /** PostgreSQL's synchronous_commit for the control plane's and the agents' connections (default: the server's, on). */
  synchronousCommit?: 'on' | 'off';
  /** Scheduler-relay processes (default 1): the first is the leader, the others standbys on the leader lease. */
  schedulerRelays?: number;
  /** Extra environment for the scheduler-relays. */
  relayEnv?: NodeJS.ProcessEnv;
}

export interface Cluster {
  /** The gateway: one URL for the SDK and the CLI. */
  url: string;
  commandUrl: string;
  queryUrl: string;
  relayHealthUrl: string;
  /** Every scheduler-relay (the leader first) and its health URL. */
  relays: Array<{ process: FabricProcess; healthUrl: string }>;
  agentHealthUrls: Record<string, string>;
  /** The event store's database (the control plane's DATABASE_URL). */
  eventsUrl: string;
  /** The blob database and role (the agents' BLOB_DATABASE_URL). */
  blobsUrl: string;
  topics: { assignments: string; agentEvents: string };
  processes: FabricProcess[];
  /** Seconds from the first spawn until every process was up. */
  startS: number;
  /** SIGTERM to every process (agents first), then drops the databases; resolves with the exit codes by name. */
  stop(): Promise<Record<string, number | null>>;
}

function withDatabase(url: string, database: string, user?: string, synchronousCommit?: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  if (synchronousCommit !== undefined) u.searchParams.set('options', `-c synchronous_commit=${synchronousCommit}`);
  if (user !== undefined) {
    u.username = user;
    u.password = '';
  }
  return u.toString();
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const tag = randomBytes(4).toString('hex');
  const eventsDb = `ndif_c_${tag}`;
  const blobsDb = `ndif_cb_${tag}`;
  const blobRole = `ndif_blobs_${tag}`;
  const admin = new pg.Client({ connectionString: o.databaseUrl });
  await admin.connect();
  const dropAll = async () => {
    const c = new pg.Client({ connectionString: o.databaseUrl });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${eventsDb} WITH (FORCE)`);
      await c.query(`DROP DATABASE IF EXISTS ${blobsDb} WITH (FORCE)`);
      await c.query(`DROP ROLE IF EXISTS ${blobRole}`);
    } finally {
      await c.end();
    }
  };
  try {
    await admin.query(`CREATE DATABASE ${eventsDb}`);
    await admin.query(`REVOKE CONNECT ON DATABASE ${eventsDb} FROM PUBLIC`);
    await admin.query(`CREATE ROLE ${blobRole} LOGIN`);
    await admin.query(`CREATE DATABASE ${blobsDb} OWNER ${blobRole}`);
  } finally {
    await admin.end();
  }
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-cluster-'));
  const eventsUrl = withDatabase(o.databaseUrl, eventsDb, undefined, o.synchronousCommit);
  const blobsUrl = withDatabase(o.databaseUrl, blobsDb, blobRole, o.synchronousCommit);
  const topics = { assignments: `c-${tag}.assignments`, agentEvents: `c-${tag}.agent-events` };
  const kafka = {
    NDIF_TRANSPORT: 'kafka',
    KAFKA_BROKERS: o.brokers,
    NDIF_TOPIC_ASSIGNMENTS: topics.assignments,
    NDIF_TOPIC_AGENT_EVENTS: topics.agentEvents,
  };
  const common: NodeJS.ProcessEnv = {
    NDIF_MODELS: o.models,
    NDIF_CATALOG_CACHE: testCatalogCache(join(tmp, 'catalog')),
    NDIF_BLOB_STORE: 'postgres',
    BLOB_DATABASE_URL: blobsUrl,
    ...o.env,
  };
  const readModels = o.readModels ?? true;
  const controlPlane: NodeJS.ProcessEnv = {
    ...common,
    NDIF_EVENT_STORE: 'postgres',
    DATABASE_URL: eventsUrl,
    NDIF_DATA_DIR: tmp,
    NDIF_READ_MODELS: readModels ? 'postgres' : 'off',
  };
  const relayEnv: NodeJS.ProcessEnv = {
    ...controlPlane,
    ...kafka,
    NDIF_RELAY_GROUP: `relay-${tag}`,
    NDIF_HEALTH_PORT: '0',
    NDIF_HEALTH_HOST: '127.0.0.1',
    ...o.relayEnv,
  };
  const processes: FabricProcess[] = [];
  const t0 = performance.now();
  try {
    const [relay, command, query] = await Promise.all([
      startProcess('scheduler-relay', relayEnv, /scheduler-relay running .*health (\S+)\)/),
      startProcess(
        'command-api',
        { ...controlPlane, NDIF_AUTH: 'off', HOST: '127.0.0.1', PORT: '0' },
        /command-api listening on (http:\/\/\S+)/,
      ),
      startProcess(
        'query-api',
        { ...controlPlane, NDIF_AUTH: 'off', HOST: '127.0.0.1', PORT: '0' },
        readModels ? /query-api listening on (http:\/\/\S+) \(.*read models/ : /query-api listening on (http:\/\/\S+)/,
      ),
    ]);
    processes.push(relay, command, query);
    const standbys = await Promise.all(
      Array.from({ length: (o.schedulerRelays ?? 1) - 1 }, () =>
        startProcess('scheduler-relay', relayEnv, /scheduler-relay standby .*health (\S+)\)/),
      ),
    );
    processes.push(...standbys);
    const gateway = await startProcess(
      'gateway',
      { NDIF_COMMAND_API_URL: command.match[1], NDIF_QUERY_API_URL: query.match[1], HOST: '127.0.0.1', PORT: '0' },
      /gateway listening on (http:\/\/\S+)/,
    );
    processes.push(gateway);
    // The agents inherit this process's environment, DATABASE_URL (the administrator's) included: they drop it.
    const agents = await Promise.all(
      o.agents.map((a) =>
        startProcess(
          `gpu-agent`,
          {
            ...common,
            ...kafka,
            ...o.agentEnv,
            NDIF_AGENT_ID: a.id,
            NDIF_AGENT_GPUS: a.gpus,
            NDIF_AGENT_RAM: '4GiB',
            NDIF_AGENT_HEARTBEAT_MS: '2000',
            NDIF_HEALTH_PORT: '0',
            NDIF_HEALTH_HOST: '127.0.0.1',
          },
          new RegExp(`agent ${a.id} ready boot \\S+ health (\\S+)`),
        ),
      ),
    );
    processes.push(...agents);
    const startS = (performance.now() - t0) / 1000;
    let stopped: Promise<Record<string, number | null>> | undefined;
    return {
      url: gateway.match[1],
      commandUrl: command.match[1],
      queryUrl: query.match[1],
      relayHealthUrl: relay.match[1],
      relays: [relay, ...standbys].map((p) => ({ process: p, healthUrl: p.match[1] })),
      agentHealthUrls: Object.fromEntries(o.agents.map((a, i) => [a.id, agents[i].match[1]])),
      eventsUrl,
      blobsUrl,
      topics,
      processes,
      startS,
      stop: () =>
        (stopped ??= (async () => {
          const codes: Record<string, number | null> = {};
          try {
            const agentCodes = await Promise.all(agents.map((p) => p.stop()));
            o.agents.forEach((a, i) => {
              codes[a.id] = agentCodes[i];
            });
            for (const p of [gateway, query, command]) codes[p.name] = await p.stop();
            // Standbys first, then the leader (a standby would otherwise take over); one may have been killed.
            for (const [i, p] of [...standbys.map((s, i) => [i + 1, s] as const), [0, relay] as const])
              codes[i === 0 ? p.name : `${p.name}-${i}`] = await p.stop();
          } finally {
            for (const p of processes)
              if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
            await dropAll();
            rmSync(tmp, { recursive: true, force: true });
          }
          return codes;
        })()),
    };
  } catch (e) {
    for (const p of processes) p.child.kill('SIGKILL');
    await dropAll().catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
}

/** Polls the relay's health until every agent of `ids` shows as registered in the query API's /agents. */
export async function waitForAgents(c: Cluster, ids: string[], timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const r = await getJson(`${c.url}/agents`);
    const seen = new Set(
      ((r.body.agents as Array<{ agentId: string; state: string }>) ?? [])
        .filter((a) => a.state === 'ACTIVE')
        .map((a) => a.agentId),
    );
    if (ids.every((id) => seen.has(id))) return;
    if (Date.now() > end)
      throw new Error(
        `agents ${ids.join(', ')} not all registered within ${timeoutMs} ms: ${JSON.stringify(r.body).slice(0, 800)}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The whole event log of a cluster's PostgreSQL store, page by page. */
export async function readAll(url: string): Promise<StoredEvent[]> {
  const store = await PostgresEventStore.open({ connectionString: url });
  try {
    const log: StoredEvent[] = [];
    for (let after = 0; ; ) {
      const page = await store.readAll({ afterPosition: after, limit: 10_000 });
      if (page.length === 0) return log;
      log.push(...page);
      after = page[page.length - 1].position;
    }
  } finally {
    await store.close();
  }
}
