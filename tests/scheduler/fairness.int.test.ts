// Priority fairness (the anchor's test): 16 closed-loop clients on one replica, each submitting its next request
// as soon as the previous one completes, with a simulated service time on the injected clock. With 5 priority
// clients, each of them completes within ±20 % of the others (FIFO inside a rank; the anchor's LIFO starved
// some); with no priority traffic all 16 complete equally.
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { SimAgent, settle, startHarness, submit, type Harness } from './harness.js';

let h: Harness;
afterEach(() => h?.close());

async function closedLoop(priorityClients: number, services: number): Promise<number[]> {
  h = await startHarness();
  const agent = new SimAgent(h, 'a1');
  agent.serviceMs = 100;
  await agent.register();
  await h.run(
    {
      type: 'RequestDeployment',
      modelKey: 'gpt2',
      settings: { concurrency: 1, weightsBytes: GIB, autoscale: { enabled: false } },
      replicas: 1,
      onDemand: false,
    },
    'op',
  );
  await settle(h, [agent]);
  const clients = Array.from({ length: 16 }, (_, i) => ({
    id: i,
    priority: i < priorityClients,
    current: '',
    n: 0,
    done: 0,
  }));
  const next = async (c: (typeof clients)[number]) => {
    c.current = `c${c.id}-${++c.n}`;
    await submit(h, c.current, 'gpt2', { priority: c.priority, submitter: `key:client${c.id}` });
  };
  for (const c of clients) {
    await next(c);
    h.advance(1);
  }
  await settle(h, [agent]);
  for (let i = 0; i < services; i++) {
    h.advance(agent.nextDoneAt()! - h.clock.now);
    await agent.heartbeat();
    await settle(h, [agent]);
    for (const c of clients) {
      if (h.state().requests.byId.get(c.current)?.status !== 'COMPLETED') continue;
      c.done++;
      await next(c);
    }
    await settle(h, [agent]);
  }
  assert.equal(h.state().cluster.replicas.size, 1, 'one replica served every request');
  return clients.map((c) => c.done);
}

function withinTwentyPercent(counts: number[]): void {
  const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
  for (const n of counts)
    assert.ok(
      Math.abs(n - mean) <= 0.2 * mean,
      `counts ${counts.join(', ')}: ${n} is more than 20 % from the mean ${mean.toFixed(1)}`,
    );
}

it('5 priority clients of 16 on one replica: every priority client within ±20 % of the others', async () => {
  const done = await closedLoop(5, 150);
  const priority = done.slice(0, 5);
  console.log(`priority clients completed ${priority.join(', ')}; normal clients ${done.slice(5).join(', ')}`);
  withinTwentyPercent(priority);
  assert.ok(Math.max(...priority) - Math.min(...priority) <= 1, 'FIFO inside the priority rank serves them in turn');
  assert.equal(priority.reduce((a, b) => a + b, 0) + done.slice(5).reduce((a, b) => a + b, 0), 150);
});

it('no priority traffic: all 16 clients complete equally', async () => {
  const done = await closedLoop(0, 160);
  console.log(`clients completed ${done.join(', ')}`);
  withinTwentyPercent(done);
  assert.ok(Math.max(...done) - Math.min(...done) <= 1);
});
