// Finding 2 of issue 12: one key's flood must not hold the only replica. Inside a rank, submitters take turns
// (fair share); a key at its running limit is passed over; the positions users are told are what dispatch does.
// On the scheduler harness (real SQLite store, projections, handlers and scheduler; a simulated agent whose
// requests each run 3 s on the injected clock).
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { truePosition } from '../../projections/control-plane/positions.js';
import { SimAgent, settle, startHarness, submit, type Harness } from './harness.js';

const RUN_MS = 3000;
let h: Harness;
afterEach(() => h?.close());

async function oneReplica(concurrency = 1): Promise<SimAgent> {
  h = await startHarness();
  const agent = new SimAgent(h, 'a1');
  agent.serviceMs = RUN_MS;
  await agent.register();
  await h.run(
    {
      type: 'RequestDeployment',
      modelKey: 'gpt2',
      settings: { weightsBytes: GIB, concurrency, autoscale: { enabled: false } },
      replicas: 1,
      onDemand: false,
    },
    'op',
  );
  await settle(h, [agent]);
  return agent;
}

/** Moves the clock to the next completion and lets everything react. */
async function nextCompletion(agent: SimAgent): Promise<void> {
  h.advance(agent.nextDoneAt()! - h.clock.now);
  await agent.heartbeat();
  await settle(h, [agent]);
}

it("a key's 150 queued requests delay another key's requests by at most one run each", async () => {
  const agent = await oneReplica();
  for (let i = 0; i < 150; i++) await submit(h, `a${i}`, 'gpt2', { submitter: 'key:A' });
  await settle(h, [agent]);
  h.advance(500);
  const waits: number[] = [];
  for (let i = 0; i < 5; i++) {
    // B works as a researcher does: the next request once the previous result is in.
    const id = `b${i}`;
    const submittedAt = h.clock.now;
    await submit(h, id, 'gpt2', { submitter: 'key:B' });
    await settle(h, [agent]);
    while (h.state().requests.byId.get(id)!.dispatchedAtMs === null) await nextCompletion(agent);
    waits.push(h.state().requests.byId.get(id)!.dispatchedAtMs! - submittedAt);
    while (h.state().requests.byId.get(id)!.status !== 'COMPLETED') await nextCompletion(agent);
  }
  console.log(`B waited ${waits.join(', ')} ms (one run is ${RUN_MS} ms)`);
  for (const w of waits)
    assert.ok(w <= RUN_MS, `B waited ${w} ms, more than one run (${RUN_MS} ms): ${waits.join(', ')}`);
});

it('every queued request is told the position at which dispatch takes it, with two keys flooding and a third arriving', async () => {
  const agent = await oneReplica();
  for (let i = 0; i < 20; i++) await submit(h, `a${i}`, 'gpt2', { submitter: 'key:A' });
  for (let i = 0; i < 8; i++) await submit(h, `c${i}`, 'gpt2', { submitter: 'key:C' });
  await settle(h, [agent]);
  for (let i = 0; i < 3; i++) await submit(h, `b${i}`, 'gpt2', { submitter: 'key:B' });
  await settle(h, [agent]);
  const s = h.state();
  const told = new Map(
    [...s.requests.byId.values()]
      .filter((v) => v.status === 'QUEUED')
      .map((v) => [v.requestId, truePosition(s, v.requestId)!]),
  );
  const order: string[] = [];
  const seen = new Set<string>();
  while (order.length < told.size) {
    await nextCompletion(agent);
    for (const v of h.state().requests.byId.values()) {
      if (told.has(v.requestId) && v.dispatchedAtMs !== null && !seen.has(v.requestId)) {
        seen.add(v.requestId);
        order.push(v.requestId);
      }
    }
  }
  for (const [id, p] of told)
    assert.equal(
      order.indexOf(id),
      p,
      `${id} was told position ${p}, dispatched ${order.indexOf(id)}th (order ${order.join(' ')})`,
    );
  // Turns: B's three went in the first rounds, not after A's and C's 26 others.
  for (const id of ['b0', 'b1', 'b2']) {
    const i = order.indexOf(id);
    assert.ok(i >= 0 && i <= 8, `${id} dispatched ${i}th (order ${order.join(' ')})`);
  }
});

it("a key at its running limit is passed over, and others' positions do not count its queued requests", async () => {
  const agent = await oneReplica(2);
  for (let i = 0; i < 10; i++) await submit(h, `a${i}`, 'gpt2', { submitter: 'key:A', options: { maxRunning: 1 } });
  await settle(h, [agent]);
  assert.equal(
    [...h.state().requests.byId.values()].filter((v) => v.status === 'DISPATCHED' || v.status === 'RUNNING').length,
    1,
    'A runs one at a time; the second slot stays free',
  );
  await submit(h, 'b0', 'gpt2', { submitter: 'key:B' });
  await submit(h, 'b1', 'gpt2', { submitter: 'key:B' });
  await h.view.catchUp();
  const before = h.state();
  assert.equal(truePosition(before, 'b1'), 1, "b1 is behind b0 only: A's held requests are not ahead of it");
  await settle(h, [agent]);
  const s = h.state();
  assert.equal(s.requests.byId.get('b0')!.status, 'RUNNING');
  assert.equal(truePosition(s, 'b1'), 0);
  assert.equal(
    [...s.requests.byId.values()].filter(
      (v) => v.submitter === 'key:A' && (v.status === 'DISPATCHED' || v.status === 'RUNNING'),
    ).length,
    1,
  );
});

it("no request holds the replica past 60 s by default, nor past its key's maximum; the next one then runs", async () => {
  const agent = await oneReplica();
  agent.serviceMs = 24 * 3_600_000; // `for (;;) {}`: it never finishes on its own
  assert.equal(
    h.state().cluster.replicas.get('gpt2#1')!.settings.timeoutMs,
    60_000,
    'the deployment named no limit: the default',
  );
  await submit(h, 'forever', 'gpt2', { submitter: 'key:A' });
  await submit(h, 'capped', 'gpt2', { submitter: 'key:A', options: { timeoutMs: 3_600_000, maxTimeoutMs: 5000 } });
  await submit(h, 'next', 'gpt2', { submitter: 'key:B' });
  await settle(h, [agent]);
  for (let t = 0; t < 70; t++) {
    h.advance(1000);
    await agent.heartbeat();
    await settle(h, [agent]);
  }
  const v = (id: string) => h.state().requests.byId.get(id)!;
  assert.equal(v('forever').status, 'ERROR');
  assert.equal(v('forever').error!.type, 'Timeout');
  assert.match(v('forever').error!.message, /the limit is 60.0 s/);
  assert.ok(v('forever').finishedAtMs! - v('forever').dispatchedAtMs! <= 62_000);
  assert.ok(
    ['DISPATCHED', 'RUNNING', 'ERROR'].includes(v('next').status),
    `B's request ran after it (${v('next').status})`,
  );
  for (let t = 0; t < 70 && v('capped').status !== 'ERROR'; t++) {
    h.advance(1000);
    await agent.heartbeat();
    await settle(h, [agent]);
  }
  assert.equal(v('capped').error?.type, 'Timeout');
  assert.ok(
    v('capped').finishedAtMs! - v('capped').dispatchedAtMs! <= 7000,
    "the key's 5 s maximum, not the 1 h it asked for",
  );
});
