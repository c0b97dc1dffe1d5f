// The embedded fabric's control-plane process (started and restarted by main.ts, its supervisor): the SQLite event
// store under the data folder, the live projection, the scheduler, the relay, the command and query APIs on one port,
// and one GPU agent child process connected to it over the IPC transport (a Unix socket in front of the in-process
// broker). Prints the URL and a hint, stops cleanly (agent child too) on SIGINT/SIGTERM, and kills itself when its
// supervisor is gone (the IPC channel closes: a kill -9 of the fabric takes the whole tree down). Queued requests
// live in the event store: after a restart over the same data folder they are still queued and run once the agent
// is back.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { apiConfigFromEnv } from '../../http/config.js';
import { prepareKeys } from '../bootstrap-key.js';
import { FileBlobStore } from '../../blobstore/files.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import { catalogConfigFromEnv, withBundled } from '../../catalog/config.js';
import { buildFabricServer } from './http-server.js';
import { InProcessBroker } from '../../transport/inprocess/broker.js';
import { InProcessTransport } from '../../transport/inprocess/transport.js';
import { IpcTransportServer } from '../../transport/ipc/server.js';
import { logLimitsFromEnv } from '../../protocol/log-limits.js';
import { ControlPlane } from '../control-plane.js';
import { privateDir, privateFile } from '../private-files.js';
import { sweepDeadAgents } from '../../sandbox/runner-dir.js';
import { openEventStoreFromEnv } from '../event-store.js';
import { logFormatFromEnv, processLogger } from '../log.js';
import { eventStoreKind, processMetrics } from '../metrics.js';
import { onDemandDefaultsFromEnv, schedulerConfigFromEnv } from '../scheduler-env.js';
import { hotStateFromEnv } from '../view-env.js';
import { auditModelsPath, SqliteAuditModels } from '../../projections/read-models/sqlite-audit-models.js';
import { agentEnv } from '../agent-env.js';
import { operatorSecretsOf, scrubOwnEnvironment } from '../operator-secrets.js';
import { AgentChild } from './agent-child.js';
import { embeddedConfigFromEnv, paths } from './config.js';
import { describeExit, restartMetrics, takePreviousExit } from './previous-exit.js';
import type { ControlPlaneMessage } from './supervisor.js';

const log = processLogger('fabric');

/** A Unix socket path must stay under ~104 bytes: in the data folder when it fits, else in the temp folder. */
function socketPath(dataDir: string): string {
  const inData = join(dataDir, 'transport.sock');
  return Buffer.byteLength(inData) < 100
    ? inData
    : join(tmpdir(), `ndif-${process.pid}-${randomBytes(4).toString('hex')}.sock`);
}

// Started by the supervisor (an IPC channel): when it is gone, so is this process, at once (as a kill -9 would).
if (process.send !== undefined) process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));

async function main(): Promise<void> {
  const env = process.env;
  const config = embeddedConfigFromEnv(env);
  const p = paths(config);
  privateDir(config.dataDir);
  const previousExit = takePreviousExit(env);
  if (previousExit !== undefined)
    log.error(
      { previousExit, restarts: previousExit.restarts },
      `the control plane was restarted: the previous process (pid ${previousExit.pid}) ended ${describeExit(previousExit)} at ${previousExit.at}`,
    );
  const metrics = processMetrics(env);
  if (metrics !== undefined) restartMetrics(metrics.registry, previousExit);
  const opened = await openEventStoreFromEnv({
    ...env,
    NDIF_EVENT_STORE: env.NDIF_EVENT_STORE || 'sqlite',
    NDIF_DATA_DIR: config.dataDir,
  });
  const blobDir = env.NDIF_BLOB_DIR || p.blobs;
  const blobs = await FileBlobStore.open({ dir: blobDir });
  const catalogConfig = withBundled(catalogConfigFromEnv(env), 'gpt2-tiny');
  const catalog = await FabricModelCatalog.open(catalogConfig);
  const broker = new InProcessBroker();
  const transport = new InProcessTransport({ broker });
  const ipc = await IpcTransportServer.listen({ path: socketPath(config.dataDir), broker });
  const scheduler = schedulerConfigFromEnv(env);
  const cp = new ControlPlane({
    store: opened.store,
    snapshots: opened.snapshots,
    transport,
    blobs,
    catalog,
    log,
    scheduler,
    hot: hotStateFromEnv(env, scheduler),
    onDemandDefaults: onDemandDefaultsFromEnv(env),
    logLimits: logLimitsFromEnv(env),
    metrics,
    storeKind: eventStoreKind(env),
  });
  await cp.start();
  // `audit --model` over the whole log: the view's audit index keeps only recent events. Its own file: a read model
  // holds its write transaction across a batch, which in the event store's file would hold up every append.
  const auditPath = opened.sqlitePath === undefined ? undefined : auditModelsPath(opened.sqlitePath);
  if (auditPath !== undefined) privateFile(auditPath);
  const auditModels = auditPath === undefined ? undefined : new SqliteAuditModels(opened.store, auditPath);
  await auditModels?.start();
  if (metrics !== undefined) {
    metrics.watchControlPlane(cp.view, cp.context.clock);
    metrics.watchRequests(cp.view);
  }

  privateFile(p.keys);
  const keys = new SqliteApiKeyStore({ path: p.keys });
  const api = apiConfigFromEnv(env);
  await prepareKeys(env, keys, api.auth, log);
  // The agent child's configuration fault, once it refused one: `ndif agents` and `ndif status` show it FAULTED.
  let agentChild: AgentChild | undefined;
  const processFaults = () => {
    const f = agentChild?.configFault;
    return f === undefined ? [] : [{ process: 'agent' as const, agentId: config.agentId, ...f }];
  };
  const app = await buildFabricServer({
    ...cp.context,
    auditModels,
    processFaults,
    controlPlaneRestarts: () =>
      previousExit === undefined
        ? { restarts: 0, lastExit: null }
        : {
            restarts: previousExit.restarts,
            lastExit: {
              pid: previousExit.pid,
              code: previousExit.code,
              signal: previousExit.signal,
              at: previousExit.at,
              stderrTail: previousExit.stderrTail.slice(-5),
            },
          },
    keys,
    config: api,
  });
  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  process.send?.({ type: 'listening', port } satisfies ControlPlaneMessage);

  // The agent serves the same models (the same NDIF_MODELS, with the bundled one made explicit).
  const models = catalogConfig.models.map((s) => ('dir' in s ? `${s.key}=${s.dir}` : s.key));
  // Every operator-grade secret has been read (stores opened, bootstrap key stored, result secret in the API's
  // config): none stays in this process's environment, where the agent (same user) could read it in /proc.
  const secrets = Object.keys(operatorSecretsOf(env));
  const scrubbed = scrubOwnEnvironment(secrets);
  const left = secrets.filter((s) => !scrubbed.includes(s));
  if (left.length > 0)
    log.warn({ variables: left }, 'could not overwrite these secrets in the process environment block');
  // The agent's environment is an allowlist: it never holds a credential worth more than the agent's role.
  const agent = new AgentChild({
    log,
    restartDelayMs: config.agentRestartMs,
    restartResetMs: config.agentRestartResetMs,
    env: agentEnv(env, {
      NDIF_TRANSPORT: 'ipc',
      NDIF_IPC_SOCKET: ipc.path,
      NDIF_BLOB_STORE: 'files',
      NDIF_BLOB_DIR: blobDir,
      NDIF_BLOB_SYNC: env.NDIF_BLOB_SYNC || 'off',
      NDIF_AGENT_ID: config.agentId,
      NDIF_MODELS: models.join(','),
      NDIF_CATALOG_CACHE: catalogConfig.cacheDir,
      NDIF_AGENT_STATE_DIR: env.NDIF_AGENT_STATE_DIR || config.dataDir,
      // The child's stderr is a pipe into this process's stderr: it logs in the format this process chose (readable
      // lines on a terminal), not JSON among readable lines.
      NDIF_LOG_FORMAT: logFormatFromEnv(env),
      // With metrics on, the agent always serves /metrics (on loopback unless NDIF_HEALTH_PORT says otherwise), and
      // this process's /metrics adds the agent's families: one scrape of the fabric's port has every series.
      ...(metrics !== undefined && env.NDIF_HEALTH_PORT === undefined
        ? { NDIF_HEALTH_PORT: '0', NDIF_HEALTH_HOST: env.NDIF_HEALTH_HOST || '127.0.0.1' }
        : {}),
    }),
  });
  agentChild = agent;
  if (metrics !== undefined) {
    metrics.alsoExport = async () => {
      const health = agent.healthUrl;
      if (health === undefined) return '';
      try {
        const r = await fetch(health.replace(/\/health$/, '/metrics'), { signal: AbortSignal.timeout(2000) });
        return r.ok ? await r.text() : '';
      } catch {
        return ''; // the agent is restarting: this scrape has the control plane's series only
      }
    };
  }
  if (config.agent) agent.start();

  let stopping: Promise<void> | undefined;
  const shutdown = (why: string) =>
    (stopping ??= (async () => {
      log.info({ why }, 'fabric stopping');
      const force = setTimeout(() => process.exit(1), 20_000);
      force.unref();
      await app.close().catch((err: unknown) => log.error({ err }, 'HTTP server did not close cleanly'));
      await agent.stop();
      // An agent child that had to be killed leaves its sandbox runner directory behind.
      sweepDeadAgents();
      await cp.stop();
      await auditModels?.stop();
      await ipc.close();
      await transport.close();
      await blobs.close();
      await keys.close();
      await opened.close();
      process.stdout.write('fabric stopped\n');
      process.exit(0);
    })());
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  if (config.agent) {
    await agent
      .ready(120_000)
      .catch((err: unknown) =>
        agent.configFault === undefined
          ? log.error({ err }, 'the agent is not ready yet; requests wait for it')
          : undefined,
      );
  }
  // One write: a reader that matched the first line finds the second beside it.
  process.stdout.write(
    `NDIF fabric listening on ${url} (event store: ${opened.describe}; models: ${catalog
      .list()
      .map((m) => m.key)
      .join(
        ', ',
      )}; agent: ${config.agent ? config.agentId : 'off'}${agent.configFault ? ` REFUSED ${agent.configFault.code}: ${agent.configFault.message}` : ''}${agent.healthUrl ? ` (health ${agent.healthUrl}${metrics ? `, metrics ${agent.healthUrl.replace(/\/health$/, '/metrics')}` : ''})` : ''}${previousExit ? `; restarted ${previousExit.restarts}× (last ${describeExit(previousExit)})` : ''}${api.auth ? '; auth on' : ''}${metrics ? `; metrics ${url}/metrics` : ''})\ntry it: curl -s ${url}/models   ·   npm run ndif -- status --url ${url}\n`,
  );
}

main().catch((err: unknown) => {
  log.fatal({ err }, 'the fabric failed to start');
  process.stderr.write(`fabric: ${(err as Error).message}\n`);
  setTimeout(() => process.exit(1), 100);
});
