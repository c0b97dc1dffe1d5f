// Entry point of the scheduler-relay process in distributed mode (docker-compose's scheduler-relay service): the
// live projection, the scheduler and the relay over the shared event store, talking to the agents over Kafka
// (NDIF_TRANSPORT=kafka). With NDIF_TRANSPORT=inprocess it serves its in-process broker to agent processes on
// this host through the IPC socket NDIF_IPC_SOCKET (required then). `GET /health` on NDIF_HEALTH_PORT.
// NDIF_RELAY_GROUP names the relay's Kafka consumer group (default ndif-relay).
// Run one per fabric: the scheduler assumes it is the only one (docs/control-plane.md).
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
import { openEventStoreFromEnv } from './event-store.js';
import { healthPortFromEnv, healthUrl, startHealthServer } from './health.js';
import { processLogger } from './log.js';
import { eventStoreKind, processMetrics } from './metrics.js';
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
  const cp = new ControlPlane({
    store: opened.store,
    snapshots: opened.snapshots,
    transport,
    blobs,
    catalog,
    log,
    topics: relayTopicsFromEnv(env),
    relayGroupId: env.NDIF_RELAY_GROUP || undefined,
    scheduler: schedulerConfigFromEnv(env),
    onDemandDefaults: onDemandDefaultsFromEnv(env),
    logLimits: logLimitsFromEnv(env),
    metrics,
    storeKind: eventStoreKind(env),
  });
  await cp.start();
  const port = healthPortFromEnv(env);
  let health = '';
  if (port !== undefined) {
    const host = env.NDIF_HEALTH_HOST || '0.0.0.0';
    const server = await startHealthServer(
      port,
      host,
      () => {
        const view = cp.view.status();
        const relay = cp.relay!.assignments.status();
        return {
          ok: view.phase === 'live' && relay.phase === 'running',
          view: { phase: view.phase, position: view.position },
          relay,
          intake: cp.relay!.intake.stats,
        };
      },
      metrics?.registry,
    );
    health = `; health ${healthUrl(server, host)}`;
  }
  process.stdout.write(
    `scheduler-relay running (event store: ${opened.describe}; transport: ${tc.kind}${ipc ? ` on ${ipc.path}` : ''}${health})\n`,
  );
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await cp.stop();
      await ipc?.close();
      await transport.close();
      await blobs.close();
      await opened.close();
      process.exit(0);
    })());
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

main().catch((err: unknown) => {
  log.fatal({ err }, 'scheduler-relay failed to start');
  process.stderr.write(`scheduler-relay: ${(err as Error).message}\n`);
  setTimeout(() => process.exit(1), 100);
});
