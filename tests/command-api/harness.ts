// The HTTP APIs over the real control plane: a SQLite event store in a temp folder, the live ControlPlaneView, the
// command handlers, the real Scheduler (stepped by the test on a clock it moves), a file blob store, the catalog over
// the bundled gpt2-tiny and, with auth on, a SQLite API key store. An agent is played by executing the agent's
// report commands through the same command handlers the relay uses.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { ApiKeys } from '../../auth/keys.js';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import type { ApiConfigInput } from '../../http/config.js';
import { FileBlobStore } from '../../blobstore/files.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import { FabricMetrics } from '../../metrics/fabric-metrics.js';
import { RegisteredCatalog } from '../../catalog/registered.js';
import { registerConfiguredModels } from '../../catalog/startup.js';
import { onDemandFromCatalog } from '../../catalog/on-demand.js';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import { buildFabricServer } from '../../fabric/embedded/http-server.js';
import type { FabricContext } from '../../fabric/context.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import type { HotStateLimits } from '../../projections/requests/state.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { encodeResultContainer } from '../../protocol/result-container.js';
import { RESULT_CONTENT_TYPE } from '../../gpu-agent/agent/result-store.js';
import { Scheduler } from '../../scheduler/scheduler.js';
import { reportAsAgent, settle as settleAll, simulatedGpus } from '../support/sim-agent.js';

export const MODEL = 'gpt2-tiny';
export const START_MS = Date.parse('2025-03-01T10:00:00.000Z');
const GIB = 1024 ** 3;

export interface ApiHarness {
  dir: string;
  store: SqliteEventStore;
  view: ControlPlaneView;
  commands: ControlPlaneCommands;
  scheduler: Scheduler;
  blobs: FileBlobStore;
  catalog: FabricModelCatalog;
  keyStore: SqliteApiKeyStore;
  keys: ApiKeys;
  ctx: FabricContext;
  app: FastifyInstance;
  clock: { now: number };
  /** Every log line the server wrote (JSON). */
  logs: Array<Record<string, unknown>>;
  /** Base URL once `listen()` was called. */
  url: string;
  listen(): Promise<string>;
  newKey(label: string, tags?: Partial<{ trusted: boolean; priority: boolean; operator: boolean }>): Promise<string>;
  close(): Promise<void>;
}

let ids = 0;

export interface HarnessOptions {
  auth?: boolean;
  config?: ApiConfigInput;
  /** Give the server a metrics registry (GET /metrics). */
  metrics?: boolean;
  /** How much finished history the view keeps (default: the fabric's). */
  hot?: Partial<HotStateLimits>;
}

export async function startApi(options: HarnessOptions = {}): Promise<ApiHarness> {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-api-'));
  const store = new SqliteEventStore({ path: join(dir, 'events.sqlite'), pollIntervalMs: 20 });
  const view = new ControlPlaneView(store, new SqliteCheckpoints(store.db), { hot: options.hot });
  await view.start();
  const clock = { now: START_MS };
  let scheduler: Scheduler | undefined;
  const commands = new ControlPlaneCommands(store, {
    onHeartbeat: (a, b, at) => scheduler?.observeHeartbeat(a, b, Date.parse(at)),
  });
  const catalog = await FabricModelCatalog.open({
    models: [{ key: MODEL, bundled: MODEL }],
    cacheDir: join(tmpdir(), 'ndif-api-catalog-cache'),
  });
  const registered = new RegisteredCatalog(() => view.state.models, catalog);
  scheduler = new Scheduler({
    view,
    commands,
    clock: () => clock.now,
    // One request per replica at a time (the tests here model a queue behind a running request).
    config: {
      onDemand: (key) => {
        const m = onDemandFromCatalog(registered)(key);
        return m === undefined ? undefined : { ...m, settings: { ...m.settings, concurrency: 1 } };
      },
    },
    onError: (e) => {
      throw e;
    },
  });
  const blobs = await FileBlobStore.open({ dir: join(dir, 'blobs'), sync: false });
  const keyStore = new SqliteApiKeyStore({ path: join(dir, 'keys.sqlite') });
  const keys = new ApiKeys(keyStore);
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n'))
        if (line.trim() !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const log = pino({ level: 'info' }, sink);
  const ctx: FabricContext = {
    store,
    commands,
    view,
    blobs,
    catalog: registered,
    localModels: catalog,
    clock: () => clock.now,
    newId: () => `gen-${++ids}`,
    log,
    ...(options.metrics ? { metrics: new FabricMetrics() } : {}),
  };
  // The served model is registered as NDIF_MODELS registers it at start.
  const startup = await registerConfiguredModels(
    { local: catalog, commands, view },
    catalog,
    () => new Date(clock.now).toISOString(),
    log,
  );
  if (startup.failed.length > 0) throw new Error(`harness model not registered: ${JSON.stringify(startup.failed)}`);
  if (startup.position !== undefined) await view.waitForPosition(startup.position);
  const app = await buildFabricServer({
    ...ctx,
    keys: keyStore,
    config: { auth: options.auth ?? false, ...options.config },
  });
  await app.ready();
  const h: ApiHarness = {
    dir,
    store,
    view,
    commands,
    scheduler,
    blobs,
    catalog,
    keyStore,
    keys,
    ctx,
    app,
    clock,
    logs,
    url: '',
    async listen() {
      h.url = await app.listen({ host: '127.0.0.1', port: 0 });
      return h.url;
    },
    async newKey(label, tags = {}) {
      const k = await keys.create(
        {
          label,
          tags: { trusted: tags.trusted ?? true, priority: tags.priority ?? false, operator: tags.operator ?? false },
        },
        'test',
        new Date(clock.now).toISOString(),
      );
      return k.key;
    },
    async close() {
      await app.close();
      await scheduler!.stop();
      await view.stop();
      await store.close();
      await keyStore.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return h;
}

/**
 * A GPU agent played through the agent's own commands (RegisterAgent, ReportReplicaHot, ReportRequestStarted/Log/
 * Completed/Failed), exactly as the relay executes them for a real agent. Results are real result containers put in
 * the blob store.
 */
export class ReportingAgent {
  private messages = 0;
  bootId = 'boot-1';

  constructor(
    private readonly h: ApiHarness,
    readonly agentId = 'agent-1',
    private readonly gpuGib = [24],
  ) {}

  private report(command: ControlPlaneCommand) {
    const agentMessageId = `${this.bootId}-m${++this.messages}`;
    const c = { ...command, ...('agentMessageId' in command ? { agentMessageId } : {}) } as ControlPlaneCommand;
    return reportAsAgent(this.h.commands, this.agentId, agentMessageId, new Date(this.h.clock.now).toISOString(), c);
  }

  register() {
    return this.report({
      type: 'RegisterAgent',
      agentId: this.agentId,
      bootId: this.bootId,
      gpus: simulatedGpus(this.gpuGib, 'virtual'),
      ramBytes: 64 * GIB,
    });
  }

  restart() {
    this.bootId = `boot-${Number(this.bootId.split('-')[1]) + 1}`;
    return this.register();
  }

  /** Reports HOT every replica placed (or loading) on this agent's current boot; returns their ids. */
  async loadPlaced(): Promise<string[]> {
    await this.h.view.catchUp();
    const out: string[] = [];
    for (const r of this.h.view.state.cluster.replicas.values()) {
      if (r.agentId === this.agentId && r.bootId === this.bootId && (r.state === 'PLACED' || r.state === 'LOADING')) {
        await this.report({
          type: 'ReportReplicaHot',
          replicaId: r.replicaId,
          agentId: this.agentId,
          agentMessageId: '',
          loadMs: 3,
        });
        out.push(r.replicaId);
      }
    }
    return out;
  }

  /** What `settle` asks of an agent: here, only loading what is placed (dispatches are left to the test). */
  async sync(): Promise<number> {
    return (await this.loadPlaced()).length;
  }

  /** The requests dispatched to this agent now, with their attempt. */
  async dispatched(): Promise<Array<{ requestId: string; attempt: number }>> {
    await this.h.view.catchUp();
    const out: Array<{ requestId: string; attempt: number }> = [];
    for (const v of this.h.view.state.requests.byId.values())
      if (v.agentId === this.agentId && (v.status === 'DISPATCHED' || v.status === 'RUNNING'))
        out.push({ requestId: v.requestId, attempt: v.attempt });
    return out;
  }

  started(requestId: string, attempt: number) {
    return this.report({ type: 'ReportRequestStarted', requestId, attempt, agentId: this.agentId, agentMessageId: '' });
  }

  log(requestId: string, attempt: number, line: string, stream: 'stdout' | 'stderr' = 'stdout') {
    return this.report({
      type: 'ReportRequestLog',
      requestId,
      attempt,
      agentId: this.agentId,
      agentMessageId: '',
      lines: [{ stream, line }],
    });
  }

  /** Streams tokens (ReportRequestTokens), as the agent's TokenStream reports them. */
  tokens(
    requestId: string,
    attempt: number,
    tokens: Array<{ step: number; invoke: number; token: number; text?: string }>,
  ) {
    return this.report({
      type: 'ReportRequestTokens',
      requestId,
      attempt,
      agentId: this.agentId,
      agentMessageId: '',
      tokens,
    });
  }

  /** Completes with a result container holding one float32 tensor of `elements` values (i / 2). */
  async complete(requestId: string, attempt: number, elements = 4): Promise<Uint8Array> {
    const data = new Float32Array(elements).map((_, i) => i / 2);
    const bytes = encodeResultContainer({
      meta: { requestId },
      invokes: [
        {
          tree: { out: { $tensor: 0 } },
          tensors: [{ dtype: 'float32', shape: [elements], data: new Uint8Array(data.buffer) }],
        },
      ],
    });
    await this.completeWith(requestId, attempt, await this.h.blobs.put(bytes, { contentType: RESULT_CONTENT_TYPE }));
    return bytes;
  }

  /** Reports that the attempt began writing its result under `ref` (ReportRequestResultWriting). */
  writing(requestId: string, attempt: number, ref: string, bytes: number) {
    return this.report({
      type: 'ReportRequestResultWriting',
      requestId,
      attempt,
      agentId: this.agentId,
      agentMessageId: '',
      resultRef: ref,
      bytes,
    });
  }

  /** Completes with a blob already stored. */
  completeWith(requestId: string, attempt: number, blob: { ref: string; size: number; sha256: string }) {
    return this.report({
      type: 'ReportRequestCompleted',
      requestId,
      attempt,
      agentId: this.agentId,
      agentMessageId: '',
      resultRef: blob.ref,
      bytes: blob.size,
      sha256: blob.sha256,
    });
  }

  fail(requestId: string, attempt: number, message: string, stack: string | null) {
    return this.report({
      type: 'ReportRequestFailed',
      requestId,
      attempt,
      agentId: this.agentId,
      agentMessageId: '',
      phase: 'execution',
      errorType: 'BlockError',
      message,
      stack,
    });
  }
}

/** Scheduler steps and replica loads until neither does anything (dispatches are left to the test). */
export function settle(h: ApiHarness, agents: ReportingAgent[], maxLoops = 20): Promise<void> {
  return settleAll(h, agents, maxLoops);
}

export const PROTOCOL = { 'x-ndif-protocol': '1.0' };

export const BLOCK =
  'async (m, ctx) => {\n  const h = await m.transformer.h[0].output;\n  console.log("shape", h.shape);\n  return h;\n}';

/** An API with rate limits off, listening, and one registered reporting agent. */
export async function startApiWithAgent(): Promise<{ h: ApiHarness; url: string; agent: ReportingAgent }> {
  const h = await startApi({ config: { rateLimit: null } });
  const url = await h.listen();
  const agent = new ReportingAgent(h);
  await agent.register();
  return { h, url, agent };
}

/** Submits `requestId` with `key` (auth on), lets `agent` load and starts it: its recorded id and attempt. */
export async function submitAndStart(
  h: ApiHarness,
  agent: ReportingAgent,
  key: string,
  requestId: string,
): Promise<{ requestId: string; attempt: number }> {
  const r = await h.app.inject({
    method: 'POST',
    url: '/requests',
    payload: submitBody({ requestId }),
    headers: { authorization: `Bearer ${key}` },
  });
  if (r.statusCode !== 202) throw new Error(`submitting ${requestId}: ${r.statusCode} ${r.body}`);
  await settle(h, [agent]);
  // Recorded under the key's scope: <its key id>:<the id chosen>.
  const d = (await agent.dispatched()).find((x) => x.requestId.endsWith(`:${requestId}`));
  if (d === undefined) throw new Error(`${requestId} was not dispatched to ${agent.agentId}`);
  await agent.started(d.requestId, d.attempt);
  return d;
}

export function submitBody(extra: Record<string, unknown> = {}) {
  return { model: MODEL, invokes: [{ input: 'The Eiffel Tower is in' }], block: BLOCK, ...extra };
}
