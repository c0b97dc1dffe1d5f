// A real control plane for agent and relay tests: SQLite event store in a temp folder, the ControlPlane (view,
// command handlers, scheduler, relay) over an in-process broker, the IPC server agent processes connect to, the
// file blob store, the catalog with gpt2-tiny; helpers to deploy, submit and wait for events; and a spawner for
// real agent processes (dist/fabric/gpu-agent.js).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { pino, type Logger } from 'pino';
import { FileBlobStore } from '../../blobstore/files.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import { parseModelList } from '../../catalog/config.js';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { ControlPlane } from '../../fabric/control-plane.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { requestPayloadOf, type TestInvoke } from './payloads.js';
import {
  InProcessBroker,
  InProcessTransport,
  IpcTransportServer,
  withDuplicateDelivery,
  type Transport,
} from '../../transport/index.js';
import { testCatalogCache } from '../support/catalog-cache.js';

/** A stored event with its data readable field by field (tests know what they wait for). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type TestEvent = StoredEvent & { data: Record<string, any> };

export const silent: Logger = pino({ level: process.env.NDIF_TEST_LOG_LEVEL ?? 'silent' });

export interface Harness {
  tmp: string;
  store: SqliteEventStore;
  cp: ControlPlane;
  broker: InProcessBroker;
  transport: Transport;
  ipc: IpcTransportServer;
  blobs: FileBlobStore;
  blobDir: string;
  catalog: FabricModelCatalog;
  run(command: ControlPlaneCommand, actor?: string): ReturnType<ControlPlane['commands']['execute']>;
  deploy(modelKey: string, replicas?: number): Promise<void>;
  submit(
    requestId: string,
    invokes: TestInvoke[],
    opts?: { trusted?: boolean; newTokens?: number; timeoutMs?: number },
  ): Promise<void>;
  /** The first event of `type` in `streamId` (after `afterRevision`) matching `where`; polls until it appears. */
  waitFor(
    streamId: string,
    type: string,
    where?: (e: TestEvent) => boolean,
    timeoutMs?: number,
    afterRevision?: number,
  ): Promise<TestEvent>;
  events(streamId: string): Promise<TestEvent[]>;
  close(): Promise<void>;
}

let seq = 0;

export async function startHarness(
  options: { duplicateDelivery?: boolean; tmp?: string; keepTmp?: boolean } = {},
): Promise<Harness> {
  const tmp = options.tmp ?? mkdtempSync(join(tmpdir(), 'ndif-agent-'));
  const store = new SqliteEventStore({ path: join(tmp, 'events.sqlite') });
  const snapshots = new SqliteCheckpoints(store.db);
  const broker = new InProcessBroker();
  const inproc = new InProcessTransport({ broker });
  const transport = options.duplicateDelivery ? withDuplicateDelivery(inproc) : inproc;
  const ipc = await IpcTransportServer.listen({ path: join(tmp, 't.sock'), broker });
  const blobDir = join(tmp, 'blobs');
  const blobs = await FileBlobStore.open({ dir: blobDir });
  const catalog = await FabricModelCatalog.open({
    models: parseModelList('gpt2-tiny'),
    cacheDir: testCatalogCache(join(tmp, 'catalog')),
  });
  const cp = new ControlPlane({ store, snapshots, transport, blobs, catalog, log: silent });
  await cp.start();
  const run = (command: ControlPlaneCommand, actor = 'key:operator') =>
    cp.commands.execute(command, { commandId: `test-${process.pid}-${++seq}`, actor, at: new Date().toISOString() });
  const h: Harness = {
    tmp,
    store,
    cp,
    broker,
    transport,
    ipc,
    blobs,
    blobDir,
    catalog,
    run,
    async deploy(modelKey, replicas = 1) {
      await run({
        type: 'RequestDeployment',
        modelKey,
        settings: { weightsBytes: catalog.get(modelKey)!.weightsBytes },
        replicas,
        onDemand: false,
      });
    },
    async submit(requestId, invokes, opts = {}) {
      await run(
        {
          type: 'SubmitRequest',
          requestId,
          modelKey: 'gpt2-tiny',
          submitter: 'key:user',
          priority: false,
          trusted: opts.trusted ?? true,
          payload: requestPayloadOf(invokes, opts.newTokens),
          options: {
            steps: (opts.newTokens ?? 0) + 1,
            ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }),
          },
        },
        'key:user',
      );
    },
    async waitFor(streamId, type, where = () => true, timeoutMs = 30_000, afterRevision = -1) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const found = ((await store.readStream(streamId, { fromRevision: afterRevision + 1 })) as TestEvent[]).find(
          (e) => e.type === type && where(e),
        );
        if (found !== undefined) return found;
        if (Date.now() > end) {
          const seen = (await store.readStream(streamId)).map((e) => e.type).join(', ');
          throw new Error(`no ${type} in ${streamId} within ${timeoutMs} ms; the stream has: ${seen || 'nothing'}`);
        }
        await sleep(20);
      }
    },
    events: (streamId) => store.readStream(streamId) as Promise<TestEvent[]>,
    async close() {
      await cp.stop();
      await ipc.close();
      await inproc.close();
      await blobs.close();
      await store.close();
      if (!options.keepTmp) rmSync(tmp, { recursive: true, force: true });
    },
  };
  return h;
}

export interface AgentProcess {
  child: ChildProcess;
  agentId: string;
  /** Resolves with the boot id once the agent printed its ready line. */
  ready: Promise<string>;
  exited: Promise<unknown>;
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

const AGENT_ENTRY = fileURLToPath(new URL('../../fabric/gpu-agent.js', import.meta.url));

export function spawnAgent(h: Harness, agentId: string, env: NodeJS.ProcessEnv = {}): AgentProcess {
  const child = spawn(process.execPath, ['--enable-source-maps', AGENT_ENTRY], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_TRANSPORT: 'ipc',
      NDIF_IPC_SOCKET: h.ipc.path,
      NDIF_BLOB_STORE: 'files',
      NDIF_BLOB_DIR: h.blobDir,
      NDIF_AGENT_ID: agentId,
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      NDIF_AGENT_HEARTBEAT_MS: '500',
      NDIF_MODELS: 'gpt2-tiny',
      NDIF_CATALOG_CACHE: testCatalogCache(join(h.tmp, 'catalog')),
      NDIF_LOG_LEVEL: process.env.NDIF_TEST_LOG_LEVEL ?? 'warn',
      ...env,
    },
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    if (process.env.NDIF_TEST_LOG_LEVEL) process.stderr.write(d);
  });
  const exited = once(child, 'exit');
  const ready = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /agent \S+ ready boot (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    void exited.then(([code]) =>
      reject(new Error(`agent exited (${String(code)}) before it was ready: ${stderr.slice(-2000)}`)),
    );
  });
  return {
    child,
    agentId,
    ready,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
    async kill9() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}
