// Entry point of a GPU agent process (`node dist/fabric/gpu-agent.js`): distributed mode (NDIF_TRANSPORT=kafka,
// docker-compose's gpu-agent service) and the embedded fabric's agent child (NDIF_TRANSPORT=ipc). Configured by
// the environment (docs/agent.md); prints `agent <id> ready boot <bootId>` on stdout once registered. Exits on
// SIGTERM/SIGINT (stopping cleanly), when its parent's IPC channel closes (the embedded fabric died), and when the
// IPC transport's socket closes.
import { cudaAvailable } from '../gpu-agent/runtime/ort/session.js';
import { agentConfigFromEnv } from '../gpu-agent/agent/config.js';
import { GpuAgent } from '../gpu-agent/agent/agent.js';
import { sandboxOpener } from '../gpu-agent/agent/sandbox-opener.js';
import { catalogConfigFromEnv } from '../catalog/config.js';
import { FabricModelCatalog } from '../catalog/catalog.js';
import { blobStoreConfigFromEnv, openBlobStore } from '../blobstore/config.js';
import { openTransport, transportConfigFromEnv } from '../transport/config.js';
import { IpcTransport } from '../transport/ipc/client.js';
import type { Transport } from '../transport/port.js';
import { healthPortFromEnv, healthUrl, startHealthServer } from './health.js';
import { processLogger } from './log.js';

const log = processLogger('gpu-agent');

async function main(): Promise<void> {
  const config = agentConfigFromEnv(process.env, cudaAvailable());
  const catalog = await FabricModelCatalog.open(catalogConfigFromEnv());
  const blobs = await openBlobStore(blobStoreConfigFromEnv());
  let shuttingDown: Promise<void> | undefined;
  const tc = transportConfigFromEnv();
  const transport: Transport =
    tc.kind === 'ipc'
      ? await IpcTransport.connect({ path: tc.socketPath, onDisconnect: () => void shutdown('the control plane closed the transport socket', 1) })
      : await openTransport(tc);
  const sandbox = sandboxOpener(async () => new (await import('../sandbox/sandbox.js')).Sandbox());
  const agent = new GpuAgent({ config, transport, blobs, catalog, log, untrusted: sandbox.open });

  const shutdown = (why: string, code: number): Promise<void> =>
    (shuttingDown ??= (async () => {
      log.info({ why }, 'agent stopping');
      const force = setTimeout(() => process.exit(code || 1), 10_000);
      force.unref();
      try {
        await agent.stop();
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

  await agent.start();
  const port = healthPortFromEnv();
  let health = '';
  if (port !== undefined) {
    const host = process.env.NDIF_HEALTH_HOST || '0.0.0.0';
    const server = await startHealthServer(port, host, () => ({ ok: agent.health().registered, ...agent.health() }));
    health = ` health ${healthUrl(server, host)}`;
  }
  process.stdout.write(`agent ${agent.agentId} ready boot ${agent.bootId}${health}\n`);
}

main().catch((err: unknown) => {
  log.fatal({ err }, 'agent failed to start');
  process.stderr.write(`gpu-agent: ${(err as Error).message}\n`);
  setTimeout(() => process.exit(1), 100);
});
