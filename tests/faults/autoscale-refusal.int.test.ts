// Regression (found by tests/faults/preemption.e2e.test.ts): an autoscale step whose extra replica is refused
// (no room for a second copy) left that refusal as the deployment's last failure; when an operator then evicted
// the model, the requests still waiting were failed with the autoscale's DeploymentRefused instead of getting a
// deployment of their own. Decided by the real scheduler over a real store with a simulated agent.
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { requestStatus } from '../../projections/control-plane/status.js';
import { data, ofType } from '../scheduler/events.js';
import { SimAgent, settle, startHarness, submit, type Harness } from '../scheduler/harness.js';

let h: Harness;
afterEach(() => h?.close());

it('a refused autoscale replica does not fail the requests waiting after the model is evicted', async () => {
  const settings = {
    concurrency: 1,
    weightsBytes: 4 * GIB,
    sizeBytes: 16 * GIB,
    minDeploymentMs: 0,
    autoscale: { thresholdMs: 1000, backoffMs: 0 },
  };
  h = await startHarness({ onDemand: { gpt2: { settings } }, config: { autoscaleCheckMs: 1000 } });
  const a = new SimAgent(h, 'a1', [24]);
  a.serviceMs = 10_000;
  await a.register();
  for (const id of ['r1', 'r2', 'r3']) await submit(h, id, 'gpt2');
  for (let i = 0; i < 4; i++) {
    h.advance(1000);
    await a.heartbeat();
    await settle(h, [a]);
  }
  const refused = (await ofType(h, 'DeploymentRefused')).map((e) => data<{ replicaId: string }>(e).replicaId);
  assert.ok(refused.includes('gpt2#2'), `the autoscale replica was refused: ${refused.join(', ')}`);
  assert.equal(h.state().cluster.replicas.get('gpt2#2')?.requestedFor, 'AUTOSCALE');

  await h.run({ type: 'EvictDeployment', modelKey: 'gpt2', actor: 'op' }, 'op');
  for (let i = 0; i < 40; i++) {
    h.advance(1000);
    await a.heartbeat();
    await settle(h, [a]);
  }
  const outcome = ['r1', 'r2', 'r3'].map((id) => {
    const v = requestStatus(h.state(), id)!;
    return `${v.status}${v.error ? ` ${v.error.type}` : ''}`;
  });
  assert.deepEqual(outcome, ['COMPLETED', 'COMPLETED', 'COMPLETED']);
});
