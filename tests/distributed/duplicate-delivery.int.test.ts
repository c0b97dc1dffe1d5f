// Duplicate delivery over a real Kafka broker: the control plane (PostgreSQL event store, live view, scheduler,
// relay, PostgreSQL read models) and a real GPU agent, with every Kafka message delivered twice in both relay
// directions (transport/faults.ts withDuplicateDelivery on the relay's transport and on the agent's), against the
// same script with single delivery. The second copies change nothing: the same streams with the same events, no
// ignored report, every event id once, and the same projections and read-model rows.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { pino } from 'pino';
import { PgBlobStore } from '../../blobstore/postgres.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import { parseModelList } from '../../catalog/config.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { ControlPlane } from '../../fabric/control-plane.js';
import { GpuAgent } from '../../gpu-agent/agent/agent.js';
import { agentConfigFromEnv } from '../../gpu-agent/agent/config.js';
import { foldControlPlane } from '../../projections/control-plane/state.js';
import { PostgresReadModels } from '../../projections/read-models/postgres.js';
import type { RequestView } from '../../projections/requests/state.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import { KafkaTransport } from '../../transport/kafka/transport.js';
import { withDuplicateDelivery } from '../../transport/faults.js';
import type { Transport, TransportMessage } from '../../transport/port.js';
import { requestPayloadOf, HANGING_BLOCK, READ_SWAP_BLOCK } from '../agent/payloads.js';
import { requireService } from '../services/require.js';
import { testCatalogCache } from '../support/catalog-cache.js';

const databaseUrl = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');
const silent = pino({ level: process.env.NDIF_TEST_LOG_LEVEL ?? 'silent' });
const PROMPT = 'The Eiffel Tower is in';
const FINAL = new Set(['RequestCompleted', 'RequestFailed', 'RequestCancelled']);
const IDS = ['read', 'swap', 'bad', 'hang', 'tokens', 'two'];

interface Outcome {
  /** Event types per stream, streams named without the run's agent id. */
  streams: Record<string, string[]>;
  events: number;
  distinctIds: number;
  /** What each request's projection says, without times and ids that differ between runs. */
  requests: Record<string, unknown>;
  readModelRequests: Record<string, unknown>;
  executed: number;
  /** Deliveries to the subscribers and distinct messages (topic, partition, offset) they were of. */
  deliveries: { relay: Counted; agent: Counted };
}

interface Counted {
  deliveries: number;
  distinct: number;
}

/** Counts what a transport's subscribers are handed (after any duplication), per distinct message. */
function counting(inner: Transport): { transport: Transport; counted: () => Counted } {
  let deliveries = 0;
  const seen = new Set<string>();
  const note = (m: TransportMessage) => {
    deliveries++;
    seen.add(`${m.topic}/${m.partition}/${m.offset}`);
  };
  return {
    transport: {
      kind: inner.kind,
      publish: (topic, messages) => inner.publish(topic, messages),
      subscribe: (topic, group, handler, options) =>
        inner.subscribe(
          topic,
          group,
          (m) => {
            note(m);
            return handler(m);
          },
          options,
        ),
      subscribeBatch: (topic, group, handler, options) =>
        inner.subscribeBatch(
          topic,
          group,
          (ms) => {
            for (const m of ms) note(m);
            return handler(ms);
          },
          options,
        ),
      close: () => inner.close(),
    },
    counted: () => ({ deliveries, distinct: seen.size }),
  };
}

const shape = (v: RequestView) => ({
  status: v.status,
  attempt: v.attempt,
  logLines: v.logLines,
  requeues: v.requeues.length,
  ignoredReports: v.ignoredReports,
  error: v.error?.type ?? null,
  cancelled: v.cancelled?.by ?? null,
  bytes: v.result === null ? null : v.result.bytes > 0,
});

async function scenario(duplicate: boolean): Promise<Outcome> {
  const tag = randomBytes(4).toString('hex');
  const schema = `dup_${tag}`;
  const agentId = `dup-agent-${tag}`;
  const topics = { assignments: `dup-${tag}.assignments`, agentEvents: `dup-${tag}.agent-events` };
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-dup-'));
  const store = await PostgresEventStore.open({ connectionString: databaseUrl!, schema });
  const blobs = await PgBlobStore.open({ connectionString: databaseUrl!, table: `${schema}_blobs` });
  const catalog = await FabricModelCatalog.open({
    models: parseModelList('gpt2-tiny'),
    cacheDir: testCatalogCache(join(tmp, 'catalog')),
  });
  const kafka = (clientId: string) => KafkaTransport.connect({ brokers: brokers!.split(','), clientId });
  const relaySide = await kafka(`dup-cp-${tag}`);
  const agentSide = await kafka(`dup-agent-${tag}`);
  const relayCount = counting(duplicate ? withDuplicateDelivery(relaySide) : relaySide);
  const agentCount = counting(duplicate ? withDuplicateDelivery(agentSide) : agentSide);
  const cp = new ControlPlane({
    store,
    snapshots: new PostgresCheckpoints(store.pool, schema),
    transport: relayCount.transport,
    blobs,
    catalog,
    log: silent,
    topics,
    relayGroupId: `relay-${tag}`,
  });
  const readModels = new PostgresReadModels({ store, pool: store.pool, schema });
  const config = agentConfigFromEnv({
    NDIF_AGENT_ID: agentId,
    NDIF_AGENT_GPUS: '1x16GiB',
    NDIF_AGENT_RAM: '8GiB',
    NDIF_AGENT_HEARTBEAT_MS: '1000',
    NDIF_TOPIC_ASSIGNMENTS: topics.assignments,
    NDIF_TOPIC_AGENT_EVENTS: topics.agentEvents,
  });
  const agent = new GpuAgent({ config, transport: agentCount.transport, blobs, catalog, log: silent });
  let seq = 0;
  const run = (command: Parameters<ControlPlane['commands']['execute']>[0], actor = 'key:operator') =>
    cp.commands.execute(command, { commandId: `dup-${tag}-${++seq}`, actor, at: new Date().toISOString() });
  const submit = (requestId: string, invokes: Parameters<typeof requestPayloadOf>[0]) =>
    run(
      {
        type: 'SubmitRequest',
        requestId,
        modelKey: 'gpt2-tiny',
        submitter: 'key:user',
        priority: false,
        trusted: true,
        payload: requestPayloadOf(invokes),
        options: { steps: 1 },
      },
      'key:user',
    );
  const waitFor = async (streamId: string, type: string, timeoutMs = 30_000) => {
    const end = Date.now() + timeoutMs;
    while (!(await store.readStream(streamId)).some((e) => e.type === type)) {
      if (Date.now() > end)
        throw new Error(
          `no ${type} in ${streamId}: ${(await store.readStream(streamId)).map((e) => e.type).join(', ')}`,
        );
      await sleep(20);
    }
  };
  try {
    await cp.start();
    await readModels.start();
    await agent.start();
    await run({
      type: 'RequestDeployment',
      modelKey: 'gpt2-tiny',
      settings: { weightsBytes: catalog.get('gpt2-tiny')!.weightsBytes },
      replicas: 1,
      onDemand: false,
    });
    await waitFor('deployment-gpt2-tiny', 'ReplicaHot');
    await submit('read', [{ prompt: PROMPT, block: 'async (m) => await m.transformer.h[1].output' }]);
    await submit('swap', [{ prompt: PROMPT, block: READ_SWAP_BLOCK }]);
    await submit('bad', [
      { prompt: PROMPT, block: 'async (m) => { await m.transformer.h[0].output; throw new Error("boom"); }' },
    ]);
    await submit('hang', [{ prompt: PROMPT, block: HANGING_BLOCK }]);
    await waitFor('request-hang', 'RequestLogged');
    await run({ type: 'CancelRequest', requestId: 'hang', actor: 'key:user', operator: false }, 'key:user');
    await submit('tokens', [{ tokens: [1, 2, 3], block: READ_SWAP_BLOCK }]);
    await submit('two', [
      { prompt: PROMPT, block: READ_SWAP_BLOCK },
      { prompt: 'Hello', block: 'async (m) => await m.transformer.ln_f.output' },
    ]);
    for (const id of IDS) {
      const end = Date.now() + 30_000;
      while (!(await store.readStream(`request-${id}`)).some((e) => FINAL.has(e.type)) && Date.now() < end)
        await sleep(20);
    }
    await sleep(500); // a late (wrong) report, or a second copy, would arrive meanwhile
    await cp.view.catchUp();
    await readModels.catchUp();
    const log: StoredEvent[] = [];
    for (let after = 0; ; ) {
      const page = await store.readAll({ afterPosition: after, limit: 10_000 });
      if (page.length === 0) break;
      log.push(...page);
      after = page[page.length - 1].position;
    }
    const streams: Record<string, string[]> = {};
    for (const e of log) {
      // Heartbeats store nothing while the agent is healthy; the agent stream holds its registration.
      const name = e.streamId.replace(agentId, '<agent>');
      streams[name] ??= [];
      streams[name].push(e.type);
    }
    const folded = foldControlPlane(log);
    const requests = Object.fromEntries(IDS.map((id) => [id, shape(folded.requests.byId.get(id)!)]));
    const readModelRequests: Record<string, unknown> = {};
    for (const id of IDS) {
      const row = await readModels.requests.get(id);
      assert.ok(row !== undefined, id);
      assert.deepEqual(
        row.view,
        JSON.parse(JSON.stringify(folded.requests.byId.get(id))),
        `${id}: the read-model row is the fold of the log`,
      );
      assert.deepEqual(
        await readModels.requests.events(id),
        JSON.parse(JSON.stringify(log.filter((e) => e.streamId === `request-${id}`))),
      );
      readModelRequests[id] = shape(row.view);
    }
    return {
      streams,
      events: log.length,
      distinctIds: new Set(log.map((e) => e.id)).size,
      requests,
      readModelRequests,
      executed: cp.relay!.intake.stats.executed,
      deliveries: { relay: relayCount.counted(), agent: agentCount.counted() },
    };
  } finally {
    await agent.stop();
    await readModels.stop();
    await cp.stop();
    await relaySide.close();
    await agentSide.close();
    await blobs.close();
    await store.pool
      .query(
        `SELECT lo_unlink(loid) FROM "${schema}_blobs"; DROP TABLE IF EXISTS "${schema}_blobs"; DROP SCHEMA IF EXISTS "${schema}" CASCADE`,
      )
      .catch(() => undefined);
    await store.close();
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (databaseUrl !== undefined && brokers !== undefined) {
  test('every Kafka message delivered twice in both relay directions changes neither the store nor the projections', {
    timeout: 120_000,
  }, async (t) => {
    const single = await scenario(false);
    const dup = await scenario(true);
    t.diagnostic(
      `single: ${single.events} events, ${single.executed} agent commands executed; duplicated: ${dup.events} events, ${dup.executed} executed; deliveries ${JSON.stringify(dup.deliveries)}`,
    );
    assert.deepEqual(single.streams['request-read'], [
      'RequestReceived',
      'RequestQueued',
      'RequestDispatched',
      'RequestStarted',
      'RequestCompleted',
    ]);
    assert.deepEqual(single.streams['request-hang'], [
      'RequestReceived',
      'RequestQueued',
      'RequestDispatched',
      'RequestStarted',
      'RequestLogged',
      'RequestCancelled',
    ]);
    assert.equal(single.streams['request-bad'].at(-1), 'RequestFailed');
    assert.deepEqual(dup.streams, single.streams);
    assert.equal(dup.events, single.events);
    assert.equal(dup.distinctIds, dup.events, 'every event id once');
    for (const types of Object.values(dup.streams)) assert.ok(!types.includes('AgentReportIgnored'), types.join(', '));
    assert.deepEqual(dup.requests, single.requests);
    assert.deepEqual(dup.readModelRequests, single.readModelRequests);
    assert.deepEqual(dup.readModelRequests, dup.requests);
    // The copies did arrive: every message to the relay and to the agent was handed over twice (once without).
    for (const side of ['relay', 'agent'] as const) {
      assert.ok(single.deliveries[side].distinct > 0);
      assert.equal(single.deliveries[side].deliveries, single.deliveries[side].distinct, `${side}: single delivery`);
      assert.equal(dup.deliveries[side].deliveries, 2 * dup.deliveries[side].distinct, `${side}: every message twice`);
    }
    assert.equal(
      dup.executed,
      2 * dup.deliveries.relay.distinct,
      'the relay executed both copies (the second decided nothing new)',
    );
  });
}
