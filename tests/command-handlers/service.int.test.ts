// The application service over a real SQLite store: validation before anything is written, ids and metadata on
// every event, redelivery stored once, concurrent commands on one stream, refusals with codes.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import { deterministicEventId } from '../../eventstore/event-id.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { GIB } from '../../domain/placement/size.js';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';

const AT = '2025-03-01T10:00:00.000Z';
let store: SqliteEventStore;
let cp: ControlPlaneCommands;
let heartbeats: string[];
beforeEach(() => {
  store = new SqliteEventStore({ path: ':memory:' });
  heartbeats = [];
  cp = new ControlPlaneCommands(store, { onHeartbeat: (a, b, at) => heartbeats.push(`${a}/${b}@${at}`) });
});
afterEach(() => store.close());

const submit: ControlPlaneCommand = {
  type: 'SubmitRequest',
  requestId: 'r1',
  modelKey: 'gpt2',
  submitter: 'key:a',
  priority: false,
  trusted: true,
  payload: { prompt: 'x' },
};
const meta = (commandId: string, actor = 'key:a') => ({ commandId, actor, at: AT });
const why = { rule: 'test', text: 'test' };
const code = (c: string) => (e: unknown) => (e as { code?: string }).code === c;

describe('validation', () => {
  it('refuses a malformed command with the field named, and stores nothing', async () => {
    await assert.rejects(
      cp.execute({ ...submit, modelKey: 'no spaces allowed' } as ControlPlaneCommand, meta('c1')),
      (e: Error & { code?: string }) => e.code === 'CP_INVALID_COMMAND' && /modelKey/.test(e.message),
    );
    await assert.rejects(
      cp.execute({ ...submit, extra: 1 } as unknown as ControlPlaneCommand, meta('c2')),
      code('CP_INVALID_COMMAND'),
    );
    await assert.rejects(
      cp.execute({ type: 'Nope' } as unknown as ControlPlaneCommand, meta('c3')),
      (e: Error & { hint?: string }) => /known "type"/.test(e.hint ?? ''),
    );
    await assert.rejects(cp.execute(submit, { commandId: 'c4', actor: 'key:a', at: 'yesterday' }), (e: Error) =>
      /metadata at/.test(e.message),
    );
    assert.equal(await store.headPosition(), 0);
  });
  it("an agent's end that carries its start: a bad startedMsBefore is refused by name; a good one stores both", async () => {
    await cp.execute(submit, meta('c1'));
    await cp.execute(
      { type: 'DispatchRequest', requestId: 'r1', attempt: 1, replicaId: 'gpt2#1', agentId: 'a1', because: why },
      meta('c2', 'scheduler'),
    );
    const head = await store.headPosition();
    const end = (startedMsBefore: number) =>
      ({
        type: 'ReportRequestCompleted',
        requestId: 'r1',
        attempt: 1,
        agentId: 'a1',
        agentMessageId: `m-${startedMsBefore}`,
        resultRef: 'blob:1',
        bytes: 10,
        sha256: 'a'.repeat(64),
        startedMsBefore,
      }) as ControlPlaneCommand;
    for (const bad of [-1, 1.5, 86_400_001])
      await assert.rejects(
        cp.execute(end(bad), meta(`bad-${bad}`, 'agent:a1')),
        (e: Error & { code?: string }) => e.code === 'CP_INVALID_COMMAND' && /startedMsBefore/.test(e.message),
      );
    assert.equal(await store.headPosition(), head, 'a refused report stores nothing');
    await cp.execute(end(40), meta('c3', 'agent:a1'));
    const stored = await store.readStream('request-r1');
    assert.deepEqual(
      stored.slice(-2).map((e) => [e.type, e.metadata.at]),
      [
        ['RequestStarted', AT],
        ['RequestCompleted', AT],
      ],
    );
    assert.equal((stored.at(-2)!.data as { startedAt: string }).startedAt, '2025-03-01T09:59:59.960Z');
  });
  it('passes refusals through with their code and HTTP status', async () => {
    await cp.execute(submit, meta('c1'));
    await assert.rejects(
      cp.execute({ type: 'CancelRequest', requestId: 'r1', actor: 'key:b', operator: false }, meta('c2', 'key:b')),
      (e: Error & { code?: string; httpStatus?: number }) => e.code === 'CP_CANCEL_FORBIDDEN' && e.httpStatus === 403,
    );
    await assert.rejects(
      cp.execute({ type: 'ScaleDeployment', modelKey: 'gpt2', replicas: 2 }, meta('c3', 'op')),
      code('CP_DEPLOYMENT_NOT_FOUND'),
    );
  });
});

describe('ids and metadata', () => {
  it('event ids come from the command id; metadata carries correlation, causation, actor, time and command id', async () => {
    const r = await cp.execute(submit, { ...meta('cmd-1'), correlationId: 'corr-9', causationId: 'cause-3' });
    const events = await store.readStream(r.streamId);
    assert.deepEqual(
      events.map((e) => e.id),
      [deterministicEventId('cmd-1', 0), deterministicEventId('cmd-1', 1)],
    );
    assert.deepEqual(events[0].metadata, {
      correlationId: 'corr-9',
      causationId: 'cause-3',
      actor: 'key:a',
      at: AT,
      commandId: 'cmd-1',
    });
    const plain = await cp.execute({ ...submit, requestId: 'r2' }, meta('cmd-2'));
    assert.deepEqual(
      (await store.readStream(plain.streamId))[0].metadata,
      { correlationId: 'cmd-2', causationId: 'cmd-2', actor: 'key:a', at: AT },
      'the command id is the causation id',
    );
    assert.deepEqual(
      events.map((e) => e.version),
      [1, 1],
    );
  });
  it('a redelivered command (same id) is stored once; a redelivered agent report too', async () => {
    await cp.execute(submit, meta('cmd-1'));
    const head = await store.headPosition();
    const again = await cp.execute(submit, meta('cmd-1'));
    assert.deepEqual([again.events.length, await store.headPosition()], [0, head]);
    await cp.execute(
      {
        type: 'RegisterAgent',
        agentId: 'a1',
        bootId: 'b1',
        gpus: [{ index: 0, memoryBytes: 8 * GIB, name: 'v' }],
        ramBytes: GIB,
      },
      meta('reg', 'agent:a1'),
    );
    await cp.execute(
      {
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        because: { rule: 't', text: 't' },
      },
      meta('d1', 'system:scheduler'),
    );
    const log: ControlPlaneCommand = {
      type: 'ReportRequestLog',
      requestId: 'r1',
      attempt: 1,
      agentId: 'a1',
      agentMessageId: 'm7',
      lines: [{ stream: 'stdout', line: 'hi' }],
    };
    await cp.execute(log, meta('agent:a1:m7', 'agent:a1'));
    await cp.execute(log, meta('agent:a1:m7', 'agent:a1'));
    assert.deepEqual(
      (await store.readStream('request-r1')).map((e) => e.type),
      ['RequestReceived', 'RequestQueued', 'RequestDispatched', 'RequestLogged'],
    );
  });
});

describe('concurrency', () => {
  it('concurrent commands on one stream all land, each decided on the latest state', async () => {
    await cp.execute(submit, meta('c1'));
    await cp.execute(
      {
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        because: { rule: 't', text: 't' },
      },
      meta('d1', 'system:scheduler'),
    );
    const lines = Array.from({ length: 20 }, (_, i) =>
      cp.execute(
        {
          type: 'ReportRequestLog',
          requestId: 'r1',
          attempt: 1,
          agentId: 'a1',
          agentMessageId: `m${i}`,
          lines: [{ stream: 'stdout', line: `line ${i}` }],
        },
        meta(`agent:a1:m${i}`, 'agent:a1'),
      ),
    );
    await Promise.all(lines);
    assert.equal((await store.readStream('request-r1')).filter((e) => e.type === 'RequestLogged').length, 20);
  });
  it('two dispatches of the same request race: one wins, the other is refused', async () => {
    await cp.execute(submit, meta('c1'));
    const because = { rule: 't', text: 't' };
    const results = await Promise.allSettled([
      cp.execute(
        { type: 'DispatchRequest', requestId: 'r1', attempt: 1, replicaId: 'gpt2#1', agentId: 'a1', because },
        meta('d1', 'system:scheduler'),
      ),
      cp.execute(
        { type: 'DispatchRequest', requestId: 'r1', attempt: 1, replicaId: 'gpt2#2', agentId: 'a2', because },
        meta('d2', 'system:scheduler'),
      ),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
    assert.equal((await store.readStream('request-r1')).filter((e) => e.type === 'RequestDispatched').length, 1);
  });
  it('two services (two processes’ worth of writers) on one store: the loser of a race decides again on the new state', async () => {
    const other = new ControlPlaneCommands(store);
    await cp.execute(submit, meta('c1'));
    const because = { rule: 't', text: 't' };
    await cp.execute(
      { type: 'DispatchRequest', requestId: 'r1', attempt: 1, replicaId: 'gpt2#1', agentId: 'a1', because },
      meta('d1', 'system:scheduler'),
    );
    const report = (svc: ControlPlaneCommands, i: number) =>
      svc.execute(
        {
          type: 'ReportRequestLog',
          requestId: 'r1',
          attempt: 1,
          agentId: 'a1',
          agentMessageId: `x${i}`,
          lines: [{ stream: 'stdout', line: `${i}` }],
        },
        meta(`agent:a1:x${i}`, 'agent:a1'),
      );
    const out = await Promise.all([report(cp, 1), report(other, 2)]);
    assert.deepEqual(out.map((o) => o.attempts).sort(), [1, 2]);
    assert.equal((await store.readStream('request-r1')).filter((e) => e.type === 'RequestLogged').length, 2);
  });
});

describe('heartbeats', () => {
  it('a heartbeat of an active agent stores nothing and is handed to the scheduler hook', async () => {
    await cp.execute(
      {
        type: 'RegisterAgent',
        agentId: 'a1',
        bootId: 'b1',
        gpus: [{ index: 0, memoryBytes: 8 * GIB, name: 'v' }],
        ramBytes: GIB,
      },
      meta('reg', 'agent:a1'),
    );
    const head = await store.headPosition();
    const r = await cp.execute({ type: 'ReportAgentHeartbeat', agentId: 'a1', bootId: 'b1' }, meta('hb1', 'agent:a1'));
    assert.deepEqual([r.events.length, await store.headPosition()], [0, head]);
    assert.deepEqual(heartbeats, [`a1/b1@${AT}`]);
  });

  it('with a liveness check, a heartbeat of an agent known alive is recorded in memory without reading the store; a transition still runs the command', async () => {
    const alive = new Map<string, string>();
    let reads = 0;
    const counted = new Proxy(store, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if (prop === 'readStream')
          return (...a: unknown[]) => {
            reads++;
            return (v as (...x: unknown[]) => unknown).apply(target, a);
          };
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const seen: string[] = [];
    const gated = new ControlPlaneCommands(counted, {
      onHeartbeat: (a, b, at) => seen.push(`${a}/${b}@${at}`),
      heartbeatIsRoutine: (a, b) => alive.get(a) === b,
    });
    await gated.execute(
      {
        type: 'RegisterAgent',
        agentId: 'a2',
        bootId: 'b1',
        gpus: [{ index: 0, memoryBytes: 8 * GIB, name: 'v' }],
        ramBytes: GIB,
      },
      meta('reg2', 'agent:a2'),
    );
    alive.set('a2', 'b1');
    const before = reads;
    const head = await store.headPosition();
    for (let i = 0; i < 5; i++) {
      const r = await gated.execute(
        { type: 'ReportAgentHeartbeat', agentId: 'a2', bootId: 'b1' },
        meta(`hb2-${i}`, 'agent:a2'),
      );
      assert.equal(r.events.length, 0);
      assert.equal(r.attempts, 0, 'no command ran');
    }
    assert.equal(reads, before, 'no stream was read');
    assert.equal(await store.headPosition(), head);
    assert.equal(seen.length, 5);
    // Not known alive with this boot (UNRESPONSIVE, LOST, another boot): the command decides, here a refusal.
    await assert.rejects(
      gated.execute({ type: 'ReportAgentHeartbeat', agentId: 'a2', bootId: 'b-old' }, meta('hb2-old', 'agent:a2')),
      code('CP_AGENT_BOOT_MISMATCH'),
    );
    await gated.execute(
      { type: 'MarkAgentUnresponsive', agentId: 'a2', bootId: 'b1', lastSeenAt: AT, timeoutMs: 6000, graceMs: 30_000 },
      meta('unresp', 'system:scheduler'),
    );
    alive.delete('a2');
    const back = await gated.execute(
      { type: 'ReportAgentHeartbeat', agentId: 'a2', bootId: 'b1' },
      meta('hb2-back', 'agent:a2'),
    );
    assert.deepEqual(
      back.events.map((e) => e.type),
      ['AgentReturned'],
    );
  });
});

describe('aggregate cache', () => {
  it('keeps a live request folded and drops a finished one (its next command reads its stream again)', async () => {
    await cp.execute(submit, meta('s1'));
    await cp.execute({ ...submit, requestId: 'r2' }, meta('s2'));
    assert.ok(cp.cache.peek('request-r1') !== undefined, 'a queued request is cached');
    await cp.execute({ type: 'CancelRequest', requestId: 'r1', actor: 'key:a', operator: false }, meta('x1'));
    assert.equal(cp.cache.peek('request-r1'), undefined, 'a cancelled request left the cache');
    assert.ok(cp.cache.peek('request-r2') !== undefined, 'the other one stays');
    const reads = cp.cache.stats.fullReads;
    // A command on the finished request still decides on its whole history (a repeat cancel is refused or a no-op).
    await cp
      .execute({ type: 'CancelRequest', requestId: 'r1', actor: 'key:a', operator: false }, meta('x2'))
      .catch(() => undefined);
    assert.equal(cp.cache.stats.fullReads, reads + 1);
    assert.equal(cp.cache.peek('request-r1'), undefined);
  });
});
