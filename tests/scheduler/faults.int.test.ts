// Faults the anchor got wrong, decided by the scheduler over a real store: eviction and demotion requeue what is
// in flight before the replica unloads (and a cancel in the same window stays cancelled), an agent restarting
// within its grace period is waited for, a lost agent's requests are requeued and complete elsewhere, stale
// agent reports never produce a second COMPLETED, and a drain finishes in-flight work first.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { isDomainError } from '../../domain/shared/errors.js';
import { GIB } from '../../domain/placement/size.js';
import { requestStatus } from '../../projections/control-plane/status.js';
import { allEvents, data, ofType, types } from './events.js';
import { SimAgent, settle, startHarness, submit, type Harness } from './harness.js';

let h: Harness;
afterEach(() => h?.close());
const status = (id: string) => requestStatus(h.state(), id)?.status;
const HOUR = 3_600_000;

async function deploy(modelKey: string, settings: Record<string, unknown>, agents: SimAgent[]) {
  await h.run({ type: 'RequestDeployment', modelKey, settings: settings as never, replicas: 1, onDemand: false }, 'op');
  await settle(h, agents);
}

/** Moves the clock in steps, heartbeating the given agents, settling at each step. */
async function runFor(ms: number, agents: SimAgent[], beating: SimAgent[] = agents, stepMs = 1000) {
  for (let t = 0; t < ms; t += stepMs) {
    h.advance(Math.min(stepMs, ms - t));
    for (const a of beating) await a.heartbeat();
    await settle(h, agents);
  }
}

describe('faults: eviction and demotion', () => {
  it('an operator evict requeues the running request before the replica unloads; queued ones wait; a cancel stays cancelled; all complete', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 500;
    await a.register();
    await deploy('gpt2', { concurrency: 1, weightsBytes: GIB }, [a]);
    for (const id of ['r1', 'r2', 'r3']) await submit(h, id, 'gpt2');
    await settle(h, [a]);
    assert.deepEqual(['r1', 'r2', 'r3'].map(status), ['RUNNING', 'QUEUED', 'QUEUED']);
    await h.run({ type: 'CancelRequest', requestId: 'r3', actor: 'key:test', operator: false });
    await h.run({ type: 'EvictDeployment', modelKey: 'gpt2', actor: 'op' }, 'op');
    await h.scheduler.step();
    assert.equal(h.state().requests.byId.get('r1')?.status, 'QUEUED', 'the running request went back to the queue');
    assert.equal(status('r1'), 'DEPLOYING', 'and the user sees its model being deployed again on demand');
    assert.equal(requestStatus(h.state(), 'r1')?.requeues[0].reason, 'PREEMPTED');
    const log = await allEvents(h);
    const requeued = log.find((e) => e.type === 'RequestRequeued')!;
    const evicting = log.find((e) => e.type === 'ReplicaEvictionRequested')!;
    const removed = log.find(
      (e) => e.type === 'ReplicaRemoved' && data<{ replicaId: string }>(e).replicaId === 'gpt2#1',
    )!;
    assert.ok(
      evicting.position < requeued.position && requeued.position < removed.position,
      'requeue lands between the eviction request and the unload',
    );
    assert.equal(requeued.metadata.causationId, evicting.id);
    assert.equal(evicting.metadata.actor, 'op');
    // The old attempt's late completion is ignored: no duplicate COMPLETED.
    h.advance(500);
    await settle(h, [a]);
    for (let i = 0; i < 4; i++) {
      h.advance(500);
      await settle(h, [a]);
    }
    assert.deepEqual(['r1', 'r2', 'r3'].map(status), ['COMPLETED', 'COMPLETED', 'CANCELLED']);
    assert.equal(
      (await ofType(h, 'RequestCompleted')).filter((e) => data<{ requestId: string }>(e).requestId === 'r1').length,
      1,
    );
    assert.ok(!(await types(h, 'request-r3')).includes('RequestDispatched'), 'the cancelled request never ran');
  });

  it('making room demotes the smallest old replica (requeueing its request first) and explains the numbers', async () => {
    const size = (gib: number) => ({ concurrency: 1, weightsBytes: 4 * GIB, sizeBytes: gib * GIB });
    h = await startHarness({
      onDemand: { a: { settings: size(8) }, b: { settings: size(8) }, c: { settings: size(12) } },
    });
    const agent = new SimAgent(h, 'a1', [24]);
    agent.serviceMs = 1000;
    await agent.register();
    await deploy('a', size(8), [agent]);
    await deploy('b', size(8), [agent]);
    h.advance(2 * HOUR);
    await agent.heartbeat();
    await submit(h, 'ra', 'a');
    await settle(h, [agent]);
    assert.equal(status('ra'), 'RUNNING');
    await submit(h, 'rc', 'c');
    await settle(h, [agent]);
    const [demotion] = await ofType(h, 'ReplicaDemotionRequested');
    const d = data<{ replicaId: string; because: { text: string; numbers: Record<string, number> } }>(demotion);
    assert.equal(d.replicaId, 'a#1');
    assert.match(
      d.because.text,
      /c \(c#1\) needs 12\.00 GiB on a1 GPU 0, which has 8\.00 GiB free; a#1 \(8\.00 GiB, 2\.0\d* ?h?.* old\)|c \(c#1\) needs 12\.00 GiB on a1 GPU 0, which has 8\.00 GiB free; a#1 \(8\.00 GiB, 7200 s old\)/,
    );
    assert.deepEqual(
      [d.because.numbers.bytesPerGpu, d.because.numbers.gpuFreeBytes, d.because.numbers.victimBytes],
      [12 * GIB, 8 * GIB, 8 * GIB],
    );
    const log = await allEvents(h);
    const requeue = log.find((e) => e.type === 'RequestRequeued')!;
    const demoted = log.find((e) => e.type === 'ReplicaDemoted')!;
    assert.ok(demotion.position < requeue.position && requeue.position < demoted.position);
    // The causal chain `ndif why ra` follows: requeue ← demotion ← c#1 requested ← on-demand deploy ← rc queued.
    const byId = new Map(log.map((e) => [e.id, e]));
    const chain: string[] = [];
    for (
      let e = byId.get(requeue.metadata.causationId);
      e !== undefined && chain.length < 10;
      e = byId.get(e.metadata.causationId)
    ) {
      chain.push(`${e.type}:${e.streamId}`);
      if (e.metadata.causationId === e.metadata.correlationId && e.type === 'RequestReceived') break;
    }
    assert.deepEqual(chain.slice(0, 3), [
      'ReplicaDemotionRequested:deployment-a',
      'ReplicaRequested:deployment-c',
      'RequestQueued:request-rc',
    ]);
    assert.equal(
      requeue.metadata.correlationId,
      demotion.metadata.correlationId,
      'the decisions made for rc carry its correlation id',
    );
    // ra goes back to the queue; a is restored from the CPU cache once b (old, unused) makes room.
    for (let i = 0; i < 5; i++) {
      h.advance(1000);
      await agent.heartbeat();
      await settle(h, [agent]);
    }
    assert.deepEqual([status('ra'), status('rc')], ['COMPLETED', 'COMPLETED']);
    const [restored] = await ofType(h, 'ReplicaRestored');
    assert.deepEqual(
      [data<{ replicaId: string }>(restored).replicaId, data<{ level: string }>(restored).level],
      ['a#1', 'CACHED_AND_FREE'],
    );
    const forA = (await ofType(h, 'ReplicaDemotionRequested'))
      .map((e) => data<{ replicaId: string; because: { refs: Record<string, string> } }>(e))
      .find((x) => x.because.refs.forModel === 'a');
    assert.equal(forA?.replicaId, 'b#1', 'b (old, idle) made room for a to come back from the CPU cache');
  });
});

describe('faults: agents', () => {
  it('an agent restarting within its grace period is waited for: nothing errors, the running request is requeued and all complete', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 20_000;
    await a.register();
    await deploy('gpt2', { concurrency: 1, weightsBytes: GIB }, [a]);
    const ids = Array.from({ length: 12 }, (_, i) => `r${i}`);
    for (const id of ids) await submit(h, id, 'gpt2');
    await settle(h, [a]);
    assert.equal(status('r0'), 'RUNNING');
    // The agent goes silent (process exited): UNRESPONSIVE after 6 s, waited for.
    await runFor(10_000, [], []);
    assert.equal(h.state().cluster.agents.get('a1')?.state, 'UNRESPONSIVE');
    assert.ok(ids.every((id) => status(id) !== 'ERROR'));
    assert.equal(status('r0'), 'RUNNING', 'the attempt is not requeued while the agent may come back');
    a.serviceMs = 100;
    await a.restart();
    await settle(h, [a]);
    assert.equal(requestStatus(h.state(), 'r0')?.requeues[0]?.reason, 'AGENT_RESTARTED');
    await runFor(3000, [a], [a], 100);
    assert.deepEqual(
      ids.map(status),
      ids.map(() => 'COMPLETED'),
    );
    assert.equal((await ofType(h, 'AgentLost')).length, 0);
    assert.deepEqual(
      (await ofType(h, 'ReplicaReloadRequired'))
        .map((e) => data<{ previousBootId: string; bootId: string }>(e))
        .map((x) => [x.previousBootId, x.bootId]),
      [['boot-1', 'boot-2']],
    );
  });

  it('a heartbeat lapse that ends with the same boot changes nothing but the agent state', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 15_000;
    await a.register();
    await submit(h, 'r1', 'gpt2');
    await settle(h, [a]);
    await runFor(8000, [a], []);
    assert.equal(h.state().cluster.agents.get('a1')?.state, 'UNRESPONSIVE');
    await runFor(8000, [a], [a]);
    assert.equal(h.state().cluster.agents.get('a1')?.state, 'ACTIVE');
    assert.equal(status('r1'), 'COMPLETED');
    assert.equal(requestStatus(h.state(), 'r1')?.requeues.length, 0);
    assert.equal((await ofType(h, 'AgentReturned')).length, 1);
  });

  it('a lost agent: its requests are requeued AGENT_LOST and complete on another agent; its late reports are ignored', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } } });
    const a1 = new SimAgent(h, 'a1');
    const a2 = new SimAgent(h, 'a2', [8]);
    a1.serviceMs = 60_000;
    await a1.register();
    await deploy('gpt2', { concurrency: 1, weightsBytes: GIB }, [a1]);
    await a2.register();
    await submit(h, 'r1', 'gpt2');
    await settle(h, [a1, a2]);
    assert.equal(requestStatus(h.state(), 'r1')?.agentId, 'a1');
    await runFor(40_000, [a2], [a2]);
    assert.equal(h.state().cluster.agents.get('a1')?.state, 'LOST');
    assert.equal(requestStatus(h.state(), 'r1')?.requeues[0]?.reason, 'AGENT_LOST');
    await runFor(2000, [a2], [a2], 100);
    const v = requestStatus(h.state(), 'r1')!;
    assert.deepEqual([v.status, v.agentId, v.attempt], ['COMPLETED', 'a2', 2]);
    // The lost agent comes back with its old attempt's result: recorded as ignored, not a second COMPLETED.
    await h.commands.execute(
      {
        type: 'ReportRequestCompleted',
        requestId: 'r1',
        attempt: 1,
        agentId: 'a1',
        agentMessageId: 'late-1',
        resultRef: 'blob:old',
        bytes: 1,
        sha256: '0'.repeat(64),
      },
      { commandId: 'agent:a1:late-1', actor: 'agent:a1', at: h.iso() },
    );
    assert.deepEqual(
      (await types(h, 'request-r1')).filter((t) => t === 'RequestCompleted' || t === 'AgentReportIgnored'),
      ['RequestCompleted', 'AgentReportIgnored'],
    );
    await assert.rejects(a1.heartbeat(), (e: unknown) => isDomainError(e) && e.code === 'CP_AGENT_LOST');
    assert.equal(data<{ reason: string }>((await ofType(h, 'ReplicaRemoved'))[0]).reason, 'AGENT_LOST');
  });

  it('a draining agent finishes its in-flight request, then its replica moves to another agent and the drain completes', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } } });
    const a1 = new SimAgent(h, 'a1');
    const a2 = new SimAgent(h, 'a2');
    a1.serviceMs = a2.serviceMs = 1000;
    await a1.register();
    await deploy('gpt2', { concurrency: 1, weightsBytes: GIB }, [a1]);
    await a2.register();
    await submit(h, 'r1', 'gpt2');
    await settle(h, [a1, a2]);
    await h.run({ type: 'DrainAgent', agentId: 'a1', actor: 'op' }, 'op');
    await submit(h, 'r2', 'gpt2');
    await settle(h, [a1, a2]);
    assert.deepEqual([status('r1'), status('r2')], ['RUNNING', 'QUEUED']);
    await runFor(3000, [a1, a2], [a1, a2], 500);
    assert.deepEqual([status('r1'), status('r2')], ['COMPLETED', 'COMPLETED']);
    assert.equal(requestStatus(h.state(), 'r2')?.agentId, 'a2');
    assert.equal(h.state().cluster.agents.get('a1')?.state, 'DRAINED');
    assert.equal(requestStatus(h.state(), 'r1')?.requeues.length, 0);
  });
});

describe('faults: time limits', () => {
  it('an execution timeout fails the request; the agent’s completion afterwards is ignored', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 5000;
    a.abortsTimedOut = false; // the run ends on its own before the abort reaches it
    await a.register();
    await submit(h, 'r1', 'gpt2', { options: { timeoutMs: 1000 } });
    await settle(h, [a]);
    await runFor(6000, [a]);
    const v = requestStatus(h.state(), 'r1')!;
    assert.deepEqual([v.status, v.error?.type, v.error?.phase], ['ERROR', 'Timeout', 'execution']);
    // Ignored, and it says that the (trusted, in-process) block has stopped: the agent takes new work again.
    assert.deepEqual(
      (await types(h, 'request-r1')).filter((t) => t === 'AgentReportIgnored' || t === 'RequestRunStopped'),
      ['AgentReportIgnored', 'RequestRunStopped'],
    );
    assert.equal(h.state().requests.blockRunningByAgent.size, 0);
  });

  it('a queue timeout fails a request that waited too long', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 10_000;
    await a.register();
    await submit(h, 'r1', 'gpt2');
    await submit(h, 'r2', 'gpt2', { options: { queueTimeoutMs: 2000 } });
    await settle(h, [a]);
    await runFor(3000, [a]);
    assert.deepEqual(
      [status('r1'), status('r2'), requestStatus(h.state(), 'r2')?.error?.type],
      ['RUNNING', 'ERROR', 'QueueTimeout'],
    );
  });
});
