// Regression (found by the soak, tests/soak): an autoscale step made room for its extra replica by demoting the
// only replica of another model that had requests waiting; that model's on-demand deployment then demoted the
// first model's replicas in turn — the two models took each other's GPUs back and forth, every round trip
// requeued the running request (PREEMPTED), and requests ended in TooManyAttempts. An autoscale replica is extra
// capacity: it may take the room of idle replicas only. Real scheduler, real store, simulated agent.
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { requestStatus } from '../../projections/control-plane/status.js';
import { data, ofType } from '../scheduler/events.js';
import { SimAgent, settle, startHarness, submit, type Harness } from '../scheduler/harness.js';

let h: Harness;
afterEach(() => h?.close());

it('autoscale does not take the GPU of a model with requests waiting or running', async () => {
  const settings = {
    weightsBytes: 4 * GIB,
    sizeBytes: 16 * GIB,
    minDeploymentMs: 0,
    autoscale: { thresholdMs: 1000, backoffMs: 0, maxReplicas: 2 },
  };
  h = await startHarness({ onDemand: { a: { settings }, b: { settings } }, config: { autoscaleCheckMs: 1000 } });
  const agent = new SimAgent(h, 'a1', [24, 24]);
  agent.serviceMs = 1500;
  await agent.register();
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    for (const m of ['a', 'b']) {
      ids.push(`${m}${i}`);
      await submit(h, `${m}${i}`, m);
    }
  }
  for (let i = 0; i < 40; i++) {
    h.advance(500);
    await agent.heartbeat();
    await settle(h, [agent]);
  }
  const outcome = ids.map((id) => {
    const v = requestStatus(h.state(), id)!;
    return `${id} ${v.status}${v.error ? ` ${v.error.type}` : ''}`;
  });
  assert.deepEqual(
    outcome,
    ids.map((id) => `${id} COMPLETED`),
  );
  const requeues = (await ofType(h, 'RequestRequeued')).map((e) => data<{ requestId: string; reason: string }>(e));
  assert.deepEqual(requeues, [], 'no request was preempted');
});
