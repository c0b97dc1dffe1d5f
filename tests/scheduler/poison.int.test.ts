// The scheduler's side of poison requests, over a real store with simulated agents: after an agent crashes (SIGSEGV)
// with requests in flight, each of them runs alone on its agent (isolated) even where the replica takes more at once;
// nothing else is dispatched beside an isolated attempt; a second death fails the suspect with
// AGENT_CRASHED_BY_REQUEST and the boots of both deaths, and the others complete.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { requestStatus } from '../../projections/control-plane/status.js';
import { allEvents, data } from './events.js';
import { SimAgent, settle, startHarness, submit, type Harness } from './harness.js';

let h: Harness;
afterEach(() => h?.close());
const status = (id: string) => requestStatus(h.state(), id)?.status;
const inFlight = () =>
  [...h.state().requests.byId.values()].filter((v) => v.status === 'DISPATCHED' || v.status === 'RUNNING');

describe('poison requests: isolation and the second death', () => {
  it('suspects run one at a time, alone; a second death fails the one in flight; everything else completes', async () => {
    h = await startHarness();
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 10_000;
    await a.register();
    await h.run(
      {
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: GIB, concurrency: 2 } as never,
        replicas: 1,
        onDemand: false,
      },
      'op',
    );
    await settle(h, [a]);
    for (const id of ['r1', 'r2', 'r3', 'r4']) await submit(h, id, 'gpt2');
    await settle(h, [a]);
    assert.deepEqual(
      ['r1', 'r2', 'r3', 'r4'].map(status),
      ['RUNNING', 'RUNNING', 'QUEUED', 'QUEUED'],
      'concurrency 2: two at once',
    );

    await a.restart({ signal: 'SIGSEGV' });
    await settle(h, [a]);
    const first = inFlight();
    assert.equal(first.length, 1, 'after the death, one suspect runs alone although the replica takes two');
    assert.equal(first[0]!.requestId, 'r1');
    assert.equal(first[0]!.isolated, true);
    const dispatch = (await allEvents(h)).filter((e) => e.type === 'RequestDispatched').at(-1)!;
    assert.equal(data<{ because: { rule: string } }>(dispatch).because.rule, 'dispatch-isolated');
    assert.equal(data<{ isolated?: boolean }>(dispatch).isolated, true);

    // The suspect kills its agent again: it fails with the evidence; the next suspect gets the agent alone.
    await a.restart({ signal: 'SIGSEGV' });
    await settle(h, [a]);
    assert.equal(status('r1'), 'ERROR');
    const failed = (await allEvents(h)).find(
      (e) => e.type === 'RequestFailed' && data<{ requestId: string }>(e).requestId === 'r1',
    )!;
    const d = data<{
      errorType: string;
      evidence: { crashes: Array<{ bootId: string; nextBootId: string; attempt: number }> };
    }>(failed);
    assert.equal(d.errorType, 'AGENT_CRASHED_BY_REQUEST');
    assert.deepEqual(
      d.evidence.crashes.map((c) => [c.attempt, c.bootId, c.nextBootId]),
      [
        [1, 'boot-1', 'boot-2'],
        [2, 'boot-2', 'boot-3'],
      ],
    );
    const second = inFlight();
    assert.deepEqual(
      second.map((v) => [v.requestId, v.isolated]),
      [['r2', true]],
      'r2 was in flight at the first death: it runs alone next',
    );

    // r2 completes alone; then the ordinary ones run two at a time again.
    a.serviceMs = 100;
    for (let t = 0; t < 10_000; t += 1000) {
      h.advance(1000);
      await a.heartbeat();
      await settle(h, [a]);
    }
    assert.equal(status('r2'), 'COMPLETED');
    assert.deepEqual(
      inFlight()
        .map((v) => v.requestId)
        .sort(),
      ['r3', 'r4'],
      `no suspect left: back to concurrency 2 (${JSON.stringify(['r1', 'r2', 'r3', 'r4'].map(status))})`,
    );
    for (let i = 0; i < 5; i++) {
      h.advance(200);
      await a.heartbeat();
      await settle(h, [a]);
    }
    assert.deepEqual(['r1', 'r2', 'r3', 'r4'].map(status), ['ERROR', 'COMPLETED', 'COMPLETED', 'COMPLETED']);
  });

  it('a suspect waiting for its agent holds the agent: nothing new is dispatched there until it is idle', async () => {
    h = await startHarness();
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 1000;
    await a.register();
    await h.run(
      {
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: GIB, concurrency: 2 } as never,
        replicas: 1,
        onDemand: false,
      },
      'op',
    );
    await settle(h, [a]);
    await submit(h, 'r1', 'gpt2');
    await settle(h, [a]);
    await a.restart({ signal: 'SIGSEGV' });
    // r1 is a suspect; before the scheduler runs again, ordinary requests arrive behind it.
    for (const id of ['n1', 'n2']) await submit(h, id, 'gpt2');
    await settle(h, [a]);
    assert.deepEqual(
      inFlight().map((v) => [v.requestId, v.isolated]),
      [['r1', true]],
      'the suspect goes first and alone',
    );
    h.advance(1000);
    await settle(h, [a]);
    assert.equal(status('r1'), 'COMPLETED');
    assert.deepEqual(
      inFlight()
        .map((v) => v.requestId)
        .sort(),
      ['n1', 'n2'],
    );
  });
});
