// Entry point of the scheduler-relay process in distributed mode (docker-compose's scheduler-relay service): the
// live projection, the scheduler and the relay over the shared event store, talking to the agents over Kafka
// (NDIF_TRANSPORT=kafka). With NDIF_TRANSPORT=inprocess it serves its in-process broker to agent processes on
// this host through the IPC socket NDIF_IPC_SOCKET (required then). `GET /health` on NDIF_HEALTH_PORT.
// NDIF_RELAY_GROUP names the relay's Kafka consumer group (default ndif-relay).
// Several may run (docs/operating.md, "Several schedulers"): with the PostgreSQL event store they take turns through
// a leader lease (NDIF_LEADER_LEASE=postgres, the default there; off: no lease, run only one). A standby follows
// the log and waits for the lease; the leader runs the scheduler and the relay, its commands carrying the lease's
// epoch; a leader that loses its lease exits at once (its supervisor starts it again, as a standby).
// NDIF_LEASE_TTL_MS: how long a lease lasts without renewal (default 5000; renewed every fifth of it).
import { blobStoreConfigFromEnv, openBlobStore } from '../blobstore/config.js';
import { FabricModelCatalog } from '../catalog/catalog.js';
import { catalogConfigFromEnv } from '../catalog/config.js';
import { FabricError } from '../protocol/errors.js';
import { openTransport, transportConfigFromEnv } from '../transport/config.js';
import { InProcessBroker } from '../transport/inprocess/broker.js';
import { InProcessTransport } from '../transport/inprocess/transport.js';
import { IpcTransportServer } from '../transport/ipc/server.js';
import type { Transport } from '../transport/port.js';
import { relayTopicsFromEnv } from '../transport/relay/wire.js';
import { logLimitsFromEnv } from '../protocol/log-limits.js';
import { ControlPlane } from './control-plane.js';
import { LeaderLease, type Leadership } from './leader-lease.js';
import { openEventStoreFromEnv } from './event-store.js';
import { healthPortFromEnv, healthUrl, startHealthServer } from './health.js';
import { processLogger } from './log.js';
import { eventStoreKind, processMetrics } from './metrics.js';
import { hotStateFromEnv } from './view-env.js';
import { onDemandDefaultsFromEnv, schedulerConfigFromEnv } from './scheduler-env.js';

const log = processLogger('scheduler-relay');

async function main(): Promise<void> {
  const env = process.env;
  const tc = transportConfigFromEnv(env);
  if (tc.kind === 'ipc') {
    throw new FabricError(
      'FABRIC_CONFIG_INVALID',
      500,
      'the scheduler-relay serves the IPC socket; it does not connect to one',
      {
        hint: 'use NDIF_TRANSPORT=kafka, or NDIF_TRANSPORT=inprocess with NDIF_IPC_SOCKET=<path to listen on>',
      },
    );
  }
  let ipc: IpcTransportServer | undefined;
  let transport: Transport;
  if (tc.kind === 'inprocess') {
    if (!env.NDIF_IPC_SOCKET) {
      throw new FabricError(
        'FABRIC_CONFIG_INVALID',
        500,
        'NDIF_TRANSPORT=inprocess needs NDIF_IPC_SOCKET: agents in other processes reach the broker through it',
        {
          hint: 'set NDIF_IPC_SOCKET=/path/transport.sock (and the same path for the agents with NDIF_TRANSPORT=ipc), or use NDIF_TRANSPORT=kafka',
        },
      );
    }
    const broker = new InProcessBroker();
    transport = new InProcessTransport({ broker });
    ipc = await IpcTransportServer.listen({ path: env.NDIF_IPC_SOCKET, broker });
  } else {
    transport = await openTransport(tc);
  }
  const opened = await openEventStoreFromEnv(env);
  const blobs = await openBlobStore(blobStoreConfigFromEnv(env));
  const catalog = await FabricModelCatalog.open(catalogConfigFromEnv(env));
  const metrics = processMetrics(env);
  const scheduler = schedulerConfigFromEnv(env);
  const cp = new ControlPlane({
    store: opened.store,
    snapshots: opened.snapshots,
    transport,
    blobs,
    catalog,
    log,
    topics: relayTopicsFromEnv(env),
    relayGroupId: env.NDIF_RELAY_GROUP || undefined,
    scheduler,
    hot: hotStateFromEnv(env, scheduler),
    onDemandDefaults: onDemandDefaultsFromEnv(env),
    logLimits: logLimitsFromEnv(env),
    metrics,
    storeKind: eventStoreKind(env),
  });
  const lease = await leaseFromEnv(env);
  let role: 'standby' | 'leader' = 'leader';
  let leadership: Leadership | undefined;
  if (lease === undefined) await cp.start();
  else {
    role = 'standby';
    await cp.follow();
  }
  const port = healthPortFromEnv(env);
  let health = '';
  if (port !== undefined) {
    const host = env.NDIF_HEALTH_HOST || '0.0.0.0';
    const server = await startHealthServer(
      port,
      host,
      () => {
        const view = cp.view.status();
        if (role === 'standby')
          return { ok: view.phase === 'live', role, view: { phase: view.phase, position: view.position } };
        const relay = cp.relay!.assignments.status();
        return {
          ok: view.phase === 'live' && relay.phase === 'running',
          role,
          ...(leadership ? { epoch: leadership.epoch } : {}),
          view: { phase: view.phase, position: view.position },
          relay,
          intake: cp.relay!.intake.stats,
        };
      },
      metrics?.registry,
    );
    health = `; health ${healthUrl(server, host)}`;
  }
  const describe = `event store: ${opened.describe}; transport: ${tc.kind}${ipc ? ` on ${ipc.path}` : ''}${health}`;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await cp.stop();
      await leadership?.release();
      await lease?.close();
      await ipc?.close();
      await transport.close();
      await blobs.close();
      await opened.close();
      process.exit(0);
    })());
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  if (lease !== undefined) {
    process.stdout.write(`scheduler-relay standby (lease holder ${lease.holder}; ${describe})\n`);
    leadership = await lease.lead().catch((e: unknown) => {
      if (stopping !== undefined) return new Promise<never>(() => undefined); // stopped while waiting: stop() exits
      throw e;
    });
    const epoch = leadership.epoch;
    void leadership.ended.then((how) => {
      if (how !== 'lost') return;
      // Stop issuing commands at once: a newer leader may hold the lease by now (its epoch fences ours anyway).
      const why = leadership?.lostReason();
      log.fatal({ epoch, why }, 'leader lease lost; exiting (restart as a standby)');
      process.stderr.write(`scheduler-relay: leader lease of epoch ${epoch} lost (${why}); exiting\n`);
      process.exit(3);
    });
    await cp.lead(epoch);
    role = 'leader';
    process.stdout.write(`scheduler-relay running (leader epoch ${epoch}; ${describe})\n`);
  } else process.stdout.write(`scheduler-relay running (${describe})\n`);
}

/** The leader lease of NDIF_LEADER_LEASE (default postgres with the PostgreSQL event store, else off). */
async function leaseFromEnv(env: NodeJS.ProcessEnv): Promise<LeaderLease | undefined> {
  const kind = env.NDIF_LEADER_LEASE || (env.NDIF_EVENT_STORE === 'postgres' ? 'postgres' : 'off');
  if (kind === 'off') return undefined;
  if (kind !== 'postgres' || !env.DATABASE_URL)
    throw new FabricError(
      'FABRIC_CONFIG_INVALID',
      500,
      `NDIF_LEADER_LEASE=${kind} needs ${kind === 'postgres' ? 'DATABASE_URL' : 'one of postgres or off'}`,
      { hint: 'NDIF_LEADER_LEASE=postgres with DATABASE_URL (several scheduler-relays), or off (run only one)' },
    );
  const ttl =
    env.NDIF_LEASE_TTL_MS === undefined || env.NDIF_LEASE_TTL_MS === '' ? 5000 : Number(env.NDIF_LEASE_TTL_MS);
  if (!Number.isSafeInteger(ttl) || ttl < 500 || ttl > 600_000)
    throw new FabricError(
      'FABRIC_CONFIG_INVALID',
      500,
      `NDIF_LEASE_TTL_MS must be an integer from 500 to 600000, got ${env.NDIF_LEASE_TTL_MS}`,
      {
        hint: "the default 5000 hands over within about 6 s of a leader's crash",
      },
    );
  return LeaderLease.open({ connectionString: env.DATABASE_URL, ttlMs: ttl });
}

main().catch((err: unknown) => {
  log.fatal({ err }, 'scheduler-relay failed to start');
  process.stderr.write(`scheduler-relay: ${(err as Error).message}\n`);
  setTimeout(() => process.exit(1), 100);
});
