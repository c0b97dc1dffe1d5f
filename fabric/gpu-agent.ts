// Entry point of a GPU agent process (`node dist/fabric/gpu-agent.js`): distributed mode (NDIF_TRANSPORT=kafka,
// docker-compose's gpu-agent service) and the embedded fabric's agent child (NDIF_TRANSPORT=ipc). Configured by
// the environment (docs/agent.md); prints `agent <id> ready boot <bootId>` on stdout once registered. Exits on
// SIGTERM/SIGINT (stopping cleanly), when its parent's IPC channel closes (the embedded fabric died), and when the
// IPC transport's socket closes. It never holds event-store credentials: DATABASE_URL and KURRENTDB_URL are removed
// from its environment at start (with a warning) and its PostgreSQL blob store takes BLOB_DATABASE_URL only.
//
// No block can end it: a fault a block causes is contained in that block's request (gpu-agent/block/containment/fault-handlers.ts);
// an unhandled rejection of the agent's own code is logged and it goes on; an uncaught exception of its own code
// leaves it in an unknown state, so it records the cause as its last words (last-words.ts) and exits once with code
// 70. A watchdog thread (watchdog.ts) ends a process whose event loop a trusted block has blocked.
import { randomUUID } from 'node:crypto';
import { cudaAvailable } from '../gpu-agent/runtime/index.js';
import { setProcessFaultPolicy } from '../gpu-agent/block/containment/fault-handlers.js';
import { errorText } from '../gpu-agent/block/host/compile.js';
import { setLateFaultReporter } from '../gpu-agent/block/containment/fault-errors.js';
import {
  lastWordsFile,
  previousExit,
  supervisorExitFromEnv,
  takeLastWords,
  writeLastWords,
} from '../gpu-agent/agent/last-words.js';
import { Watchdog, cgroupMemoryMax, collectGarbage } from '../gpu-agent/agent/watchdog.js';
import { agentConfigFromEnv } from '../gpu-agent/agent/config.js';
import { GpuAgent } from '../gpu-agent/agent/agent.js';
import { sandboxOpener } from '../gpu-agent/agent/sandbox-opener.js';
import { catalogConfigFromEnv } from '../catalog/config.js';
import { FabricModelCatalog } from '../catalog/catalog.js';
import { blobStoreConfigFromEnv, openBlobStore } from '../blobstore/config.js';
import { FileBlobStore } from '../blobstore/files.js';
import type { BlobStore } from '../blobstore/port.js';
import { FabricError } from '../protocol/errors.js';
import { openTransport, transportConfigFromEnv } from '../transport/config.js';
import { IpcTransport } from '../transport/ipc/client.js';
import type { Transport } from '../transport/port.js';
import { CONFIG_FAULT_EXIT, ConfigFault, healthPortFromEnv, healthUrl, startHealthServer } from './health.js';
import { processLogger } from './log.js';
import { AgentMetrics } from '../metrics/agent.js';
import { metricsEnabledFromEnv, newRegistry } from '../metrics/registry.js';

const log = processLogger('gpu-agent');

/**
 * The blob store for results. A files store syncs each result to disk unless NDIF_BLOB_SYNC=off (the embedded
 * fabric's choice: a written result then survives a crash or kill -9 of any process, as the SQLite event store's
 * commits do in its default mode, and only an OS crash or power loss can lose the latest ones; ~12 ms less per
 * request here).
 */
async function openResultBlobs(env: NodeJS.ProcessEnv): Promise<BlobStore> {
  if (env.NDIF_BLOB_STORE === 'postgres' && !env.BLOB_DATABASE_URL) {
    throw new FabricError(
      'AGENT_CONFIG_INVALID',
      500,
      "a GPU agent with NDIF_BLOB_STORE=postgres needs BLOB_DATABASE_URL: it never uses DATABASE_URL, the event store's database",
      {
        hint: 'set BLOB_DATABASE_URL=postgres://<blob role>@host:5432/<blob database> (a role that reaches only the blob table)',
      },
    );
  }
  const c = blobStoreConfigFromEnv(env);
  const sync = env.NDIF_BLOB_SYNC || 'on';
  if (sync !== 'on' && sync !== 'off')
    throw new FabricError(
      'AGENT_CONFIG_INVALID',
      500,
      `NDIF_BLOB_SYNC=${JSON.stringify(sync)} is not valid: on or off`,
      { hint: 'fix NDIF_BLOB_SYNC or unset it for the default (on)' },
    );
  if (c.kind === 'files') return FileBlobStore.open({ dir: c.dir, maxBytes: c.maxBytes, sync: sync === 'on' });
  return openBlobStore(c);
}

/** Event-store settings an agent never holds (it sees only its assignments and publishes only its own events). */
const EVENT_STORE_VARIABLES = ['DATABASE_URL', 'KURRENTDB_URL'] as const;

/**
 * Drops the event store's credentials from this process's environment before anything reads it, so neither this
 * process nor a child it starts (sandbox runners) holds them; says so when some were given.
 */
function dropEventStoreCredentials(env: NodeJS.ProcessEnv): void {
  const given = EVENT_STORE_VARIABLES.filter((k) => env[k] !== undefined);
  for (const k of given) delete env[k];
  if (given.length > 0)
    log.warn(
      { ignored: given },
      `${given.join(' and ')} ignored: a GPU agent never holds event-store credentials (its blob store's database is BLOB_DATABASE_URL)`,
    );
}

/** True when a stack has frames of a block's compiled file: a block's fault that escaped its context. */
function fromBlock(e: unknown): boolean {
  try {
    return e instanceof Error && /\bblock-\d+\.js:\d+/.test(String(e.stack));
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  dropEventStoreCredentials(process.env);
  // Runner directories of agents that died without closing their sandbox (kill -9, OOM) go at start.
  (await import('../sandbox/runner-dir.js')).sweepDeadAgents();
  const config = agentConfigFromEnv(process.env, cudaAvailable());
  const bootId = randomUUID();
  const wordsFile = lastWordsFile(config.stateDir, config.agentId);
  const before = previousExit(supervisorExitFromEnv(process.env), takeLastWords(wordsFile));
  let running: () => string[] = () => [];
  let faulted = false;
  setProcessFaultPolicy({
    exception(err) {
      if (fromBlock(err)) return void log.warn({ err }, "a block's exception escaped its request's context; contained");
      if (faulted) return;
      faulted = true;
      const cause = `uncaught exception in the agent's own code: ${errorText(err)}`;
      writeLastWords(wordsFile, {
        agentId: config.agentId,
        bootId,
        at: new Date().toISOString(),
        cause,
        running: running(),
      });
      log.fatal({ err, running: running() }, `${cause}; the agent exits (code 70) and its supervisor starts it again`);
      setTimeout(() => process.exit(70), 50);
    },
    rejection(reason) {
      if (fromBlock(reason))
        return void log.warn({ err: reason }, "a block's rejection escaped its request's context; contained");
      log.error({ err: reason }, "unhandled rejection in the agent's own code; contained, the agent goes on");
    },
  });
  setLateFaultReporter((requestId, invoke, e) =>
    log.warn(
      { requestId, invoke, type: e.type, message: e.message },
      'a block faulted after its request ended; dropped',
    ),
  );
  const catalog = await FabricModelCatalog.open(catalogConfigFromEnv());
  const blobs = await openResultBlobs(process.env);
  let shuttingDown: Promise<void> | undefined;
  const tc = transportConfigFromEnv();
  const transport: Transport =
    tc.kind === 'ipc'
      ? await IpcTransport.connect({
          path: tc.socketPath,
          onDisconnect: () => void shutdown('the control plane closed the transport socket', 1),
        })
      : await openTransport(tc);
  // Only the agent's own metrics: FabricMetrics would bring the control plane's modules into this process.
  const registry = metricsEnabledFromEnv(process.env) ? newRegistry() : undefined;
  let agentMetrics: AgentMetrics | undefined;
  const sandbox = sandboxOpener(
    async () =>
      new (await import('../sandbox/index.js')).Sandbox({
        onRunnerCrashed: (r) =>
          log.warn(
            { pid: r.pid, code: r.exit.code, signal: r.exit.signal, printed: r.withheld.slice(-30) },
            'a sandbox runner died under a request; what it printed as it died (not shown to the user)',
          ),
        ...(agentMetrics ? { onRunnerSpawned: agentMetrics.runnerSpawned } : {}),
      }),
  );
  const agent = new GpuAgent({
    config,
    transport,
    blobs,
    catalog,
    log,
    untrusted: sandbox.open,
    bootId,
    ...(before ? { previousExit: before } : {}),
  });
  if (registry !== undefined)
    agentMetrics = new AgentMetrics(registry, agent, config, { stats: () => sandbox.current()?.allStats() ?? [] });
  running = () => agent.requests.runningIds();
  if (before)
    log.warn({ previousExit: before }, 'the previous process of this agent ended; reporting how with the registration');
  const memoryMaxBytes = config.memoryMaxBytes ?? cgroupMemoryMax();
  let lastStop = 0;
  const watchdog = new Watchdog({
    stallMs: config.stallMs,
    lastWordsFile: wordsFile,
    agentId: config.agentId,
    bootId,
    ...(memoryMaxBytes === undefined ? {} : { memoryMaxBytes }),
    memoryFloorBytes: config.memoryFloorBytes,
    onInterrupt: (i) => {
      // One block at a time: the memory of the one stopped last takes a moment to be given back.
      if (Date.now() - lastStop < 2000) return;
      const stopped = agent.requests.stopInProcess(
        'OutOfMemory',
        `the agent ran short of memory while this block ran (${i.detail}); the block was stopped. Keep less in memory (save slices, means), or run it untrusted, where the sandbox's memory cap applies`,
      );
      if (stopped === undefined) return;
      lastStop = Date.now();
      log.warn({ detail: i.detail, requestId: stopped }, 'a trusted block was stopped: the agent ran short of memory');
      for (const ms of [50, 300, 1000])
        setTimeout(() => {
          collectGarbage();
          log.debug({ rss: process.memoryUsage.rss(), running: agent.requests.runningIds() }, 'memory after the stop');
        }, ms).unref();
    },
  });
  agent.requests.onRunningChange = (r) => watchdog.setRunning(r);
  agent.requests.onBlockEntered = (id) => watchdog.setCulprit(id);

  const shutdown = (why: string, code: number): Promise<void> =>
    (shuttingDown ??= (async () => {
      log.info({ why }, 'agent stopping');
      const force = setTimeout(() => process.exit(code || 1), 10_000);
      force.unref();
      try {
        await agent.stop();
        await watchdog.stop();
        await sandbox.close();
        await transport.close().catch(() => undefined);
        await blobs.close();
      } finally {
        process.exit(code);
      }
    })());
  process.on('SIGTERM', () => void shutdown('SIGTERM', 0));
  process.on('SIGINT', () => void shutdown('SIGINT', 0));
  if (process.send !== undefined) process.on('disconnect', () => void shutdown('the parent process is gone', 0));

  // The health server first: a port in use is a configuration fault, refused before the agent registers
  // (it would otherwise show ACTIVE while its supervisor restarts it forever).
  const port = healthPortFromEnv();
  let health = '';
  if (port !== undefined) {
    const host = process.env.NDIF_HEALTH_HOST || '0.0.0.0';
    let server: Awaited<ReturnType<typeof startHealthServer>>;
    try {
      server = await startHealthServer(
        port,
        host,
        () => ({ ok: agent.health().registered, ...agent.health() }),
        registry,
      );
    } catch (e) {
      throw new ConfigFault(
        'AGENT_HEALTH_PORT_IN_USE',
        `NDIF_HEALTH_PORT=${port} cannot be used on ${host}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    health = ` health ${healthUrl(server, host)}`;
  }
  await agent.start();
  process.stdout.write(`agent ${agent.agentId} ready boot ${agent.bootId}${health}\n`);
}

main().catch((err: unknown) => {
  log.fatal({ err }, 'agent failed to start');
  const fault = err instanceof ConfigFault;
  process.stderr.write(`gpu-agent: ${fault ? `${err.code}: ` : ''}${(err as Error).message}\n`);
  // A configuration fault exits with EX_CONFIG: the embedded fabric's supervisor does not start it again.
  setTimeout(() => process.exit(fault ? CONFIG_FAULT_EXIT : 1), 100);
});
