// Audit queries over the recorded agent-loss log on a real SQLite store with the audit projection folded from it:
// each filter returns exactly the events it names (checked against the log itself), paging covers an answer once,
// and filters on metadata that was never recorded — or that this store does not index — are refused, never
// answered unfiltered.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KurrentDbEventStore } from '../../eventstore/kurrentdb/store.js';
import type { StoredEvent } from '../../eventstore/port.js';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { isFabricError } from '../../protocol/errors.js';
import { foldControlPlane } from '../../projections/control-plane/state.js';
import type { AuditState } from '../../projections/audit/projection.js';
import { auditEvents, renderAudit, type AuditSources } from '../../forensics/index.js';
import { readFixture } from '../golden/record.js';
import { fixtureStore } from './fixture-store.js';

let store: SqliteEventStore;
let log: StoredEvent[];
let audit: AuditState;
let sources: AuditSources;

before(async () => {
  ({ store, events: log } = await fixtureStore('agent-loss'));
  audit = foldControlPlane(log).audit;
  sources = { store, audit: () => audit };
});
after(() => store.close());

const positions = (a: { events: { position: number }[] }) => a.events.map((e) => e.position);
const where = (f: (e: StoredEvent) => boolean) => log.filter(f).map((e) => e.position);
const modelOf = new Map<string, string>();
for (const e of readFixture('agent-loss').events)
  if (e.type === 'RequestReceived') modelOf.set(e.streamId, (e.data as { modelKey: string }).modelKey);
const isGpt2 = (e: StoredEvent) => e.streamId === 'deployment-gpt2' || modelOf.get(e.streamId) === 'gpt2';

async function refusal(
  input: unknown,
  src: AuditSources = sources,
): Promise<{ code: string; status: number; message: string; hint?: string; details?: Record<string, unknown> }> {
  try {
    await auditEvents(src, input);
  } catch (e) {
    assert.ok(isFabricError(e), String(e));
    return { code: e.code, status: e.httpStatus, message: e.message, hint: e.hint, details: e.details };
  }
  assert.fail(`answered ${JSON.stringify(input)}`);
}

describe('audit filters', () => {
  it('by actor: every event a key issued, from the store index', async () => {
    const a = await auditEvents(sources, { actor: 'key:dave' });
    assert.equal(a.source, 'event-store-index');
    assert.deepEqual(
      positions(a),
      where((e) => e.metadata.actor === 'key:dave'),
    );
    assert.ok(a.events.length > 0);
    assert.ok(a.events.every((e) => e.actor === 'key:dave'));
  });

  it('by model: deployment events and every event of its requests, from the audit projection', async () => {
    const a = await auditEvents(sources, { modelKey: 'gpt2' });
    assert.equal(a.source, 'audit-projection');
    assert.deepEqual(positions(a), where(isGpt2));
    const bySystem = await auditEvents(sources, {
      modelKey: 'gpt2',
      actor: 'system:scheduler',
      type: 'RequestRequeued',
    });
    assert.deepEqual(
      positions(bySystem),
      where((e) => isGpt2(e) && e.metadata.actor === 'system:scheduler' && e.type === 'RequestRequeued'),
    );
    assert.equal(bySystem.events.length, 2, 'one AGENT_LOST and one AGENT_RESTARTED requeue');
    assert.deepEqual((await auditEvents(sources, { modelKey: 'llama' })).events, []);
  });

  it('by correlation id: one operation (a request and the decisions taken for it)', async () => {
    const corr = log.find((e) => e.type === 'AgentLost')!.metadata.correlationId;
    const a = await auditEvents(sources, { correlationId: corr });
    assert.deepEqual(
      positions(a),
      where((e) => e.metadata.correlationId === corr),
    );
    assert.ok(a.events.length >= 2);
  });

  it('by causation id, type, stream prefix and time window', async () => {
    const lost = log.find((e) => e.type === 'AgentLost')!;
    assert.deepEqual(
      positions(await auditEvents(sources, { causationId: lost.id })),
      where((e) => e.metadata.causationId === lost.id),
    );
    assert.deepEqual(
      positions(await auditEvents(sources, { type: 'AgentRegistered' })),
      where((e) => e.type === 'AgentRegistered'),
    );
    assert.deepEqual(
      positions(await auditEvents(sources, { streamPrefix: 'agent-' })),
      where((e) => e.streamId.startsWith('agent-')),
    );
    const from = log[40].metadata.at;
    const to = log[100].metadata.at;
    const inWindow = (e: StoredEvent) =>
      Date.parse(e.metadata.at) >= Date.parse(from) && Date.parse(e.metadata.at) < Date.parse(to);
    assert.deepEqual(positions(await auditEvents(sources, { fromAt: from, toAt: to })), where(inWindow));
    assert.deepEqual(
      positions(await auditEvents(sources, { modelKey: 'gpt2', fromAt: from, toAt: to })),
      where((e) => isGpt2(e) && inWindow(e)),
    );
    assert.deepEqual(
      positions(await auditEvents(sources, { actor: 'agent:a1', type: 'RequestCompleted' })),
      where((e) => e.metadata.actor === 'agent:a1' && e.type === 'RequestCompleted'),
    );
  });

  it('pages through an answer once, on both paths', async () => {
    for (const filter of [{ streamPrefix: 'request-' }, { modelKey: 'gpt2' }]) {
      const all: number[] = [];
      let after = 0;
      for (let page = 0; page < 100; page++) {
        const a = await auditEvents(sources, { ...filter, afterPosition: after, limit: 7 });
        all.push(...positions(a));
        if (a.nextAfterPosition === null) break;
        assert.equal(a.events.length, 7);
        after = a.nextAfterPosition;
      }
      assert.deepEqual(all, positions(await auditEvents(sources, { ...filter, limit: 10_000 })));
    }
  });

  it('includes the event data only when asked, and renders a line per event', async () => {
    const plain = await auditEvents(sources, { type: 'AgentLost' });
    assert.equal(plain.events[0].data, undefined);
    const full = await auditEvents(sources, { type: 'AgentLost' }, { data: true });
    assert.equal((full.events[0].data as { agentId: string }).agentId, 'a1');
    const text = renderAudit(plain);
    assert.match(
      text,
      /^audit type=AgentLost: 1 event\(s\) \(from the event store's index\)\n#\d+ {2}\S+ {2}system:scheduler {2}AgentLost {2}agent-a1\n {4}agent a1 \(boot a1-boot-1\) lost: last seen/,
    );
  });
});

describe('audit refusals', () => {
  it('a filter on metadata that was never recorded in an index is refused, with what to use instead', async () => {
    const r = await refusal({ requestId: 'loss-1' });
    assert.deepEqual([r.code, r.status], ['AUDIT_FILTER_NOT_RECORDED', 400]);
    assert.match(r.hint!, /streamPrefix=request-<id>/);
    assert.deepEqual(r.details?.recorded, [
      'actor',
      'modelKey',
      'correlationId',
      'causationId',
      'type',
      'streamPrefix',
      'fromAt',
      'toAt',
    ]);
    for (const f of [
      { agentId: 'a1' },
      { commandId: 'x' },
      { actr: 'key:dave' },
      { actor: 'key:dave', replicaId: 'gpt2#1' },
      { 'data.reason': 'AGENT_LOST' },
    ]) {
      assert.equal((await refusal(f)).code, 'AUDIT_FILTER_NOT_RECORDED', JSON.stringify(f));
    }
  });

  it('no filter at all, or only paging, is refused rather than answered with the whole log', async () => {
    assert.equal((await refusal({})).code, 'AUDIT_NO_FILTER');
    assert.equal((await refusal({ limit: 5, afterPosition: 0 })).code, 'AUDIT_NO_FILTER');
    assert.equal((await refusal({ actor: undefined })).code, 'AUDIT_NO_FILTER');
  });

  it('bad values are refused', async () => {
    for (const f of [
      { actor: '' },
      { actor: 7 },
      { fromAt: 'yesterday' },
      { fromAt: '2025-03-03T09:00:00Z', toAt: '2025-03-03T08:00:00Z' },
      { type: 'X', limit: 0 },
      { type: 'X', limit: 10_001 },
      { type: 'X', afterPosition: -1 },
      null,
      'actor=x',
      [],
    ]) {
      assert.equal((await refusal(f)).code, 'AUDIT_BAD_FILTER', JSON.stringify(f));
    }
  });

  it('modelKey without the audit projection is refused as not indexed here', async () => {
    const r = await refusal({ modelKey: 'gpt2' }, { store });
    assert.equal(r.code, 'AUDIT_FILTER_NOT_INDEXED');
    assert.match(r.message, /audit projection/);
  });

  it('on a store that indexes no metadata (KurrentDB), every store-indexed filter is refused as not indexed there', async () => {
    // The adapter refuses before it talks to a server; none is needed (and none runs here).
    const kurrent = new KurrentDbEventStore({ connectionString: 'kurrentdb://127.0.0.1:1?tls=false' });
    try {
      for (const f of [
        { actor: 'key:dave' },
        { correlationId: 'c' },
        { type: 'AgentLost' },
        { fromAt: '2025-03-03T08:00:00Z' },
      ]) {
        const r = await refusal(f, { store: kurrent });
        assert.equal(r.code, 'AUDIT_FILTER_NOT_INDEXED', JSON.stringify(f));
        assert.match(r.message, /kurrentdb event store does not index it/);
      }
      assert.equal(
        (await refusal({ modelKey: 'gpt2', correlationId: 'c' }, { store: kurrent })).code,
        'AUDIT_FILTER_NOT_INDEXED',
      );
      assert.equal((await refusal({ requestId: 'loss-1' }, { store: kurrent })).code, 'AUDIT_FILTER_NOT_RECORDED');
    } finally {
      await kurrent.close();
    }
  });
});
