// Autoscale on the oldest wait: threshold 30 s, one replica at a time copying a live replica's settings,
// backoff 120 s, at most 3 replicas; checked every 5 s.
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { data, ofType } from './events.js';
import { SimAgent, settle, startHarness, submit, type Harness } from './harness.js';

let h: Harness;
afterEach(() => h?.close());

it('adds a replica when the oldest request has waited over 30 s, backs off 120 s, stops at 3', async () => {
  h = await startHarness({
    onDemand: { gpt2: { settings: { concurrency: 1, weightsBytes: GIB, dtype: 'float16', timeoutMs: null } } },
  });
  const a = new SimAgent(h, 'a1', [24, 24, 24, 24]);
  a.serviceMs = 3_600_000;
  await a.register();
  for (let i = 0; i < 8; i++) await submit(h, `r${i}`, 'gpt2');
  const scaledAt: number[] = [];
  const t0 = h.clock.now;
  for (let t = 0; t < 400_000; t += 1000) {
    h.advance(1000);
    await a.heartbeat();
    await settle(h, [a]);
    const n = (await ofType(h, 'DeploymentScaled')).length;
    if (n > scaledAt.length) scaledAt.push(h.clock.now - t0);
  }
  // Checked every 5 s: the first step after 30 s of waiting that is a check; then 120 s apart; then the maximum.
  assert.equal(scaledAt.length, 2);
  assert.ok(scaledAt[0] > 30_000 && scaledAt[0] <= 36_000, `first autoscale at ${scaledAt[0]} ms`);
  assert.ok(
    scaledAt[1] - scaledAt[0] >= 120_000 && scaledAt[1] - scaledAt[0] <= 126_000,
    `second ${scaledAt[1] - scaledAt[0]} ms later`,
  );
  const requested = (await ofType(h, 'ReplicaRequested')).map((e) =>
    data<{ reason: string; copiedFrom: string | null; settings: { dtype: string } }>(e),
  );
  assert.deepEqual(
    requested.map((r) => [r.reason, r.copiedFrom, r.settings.dtype]),
    [
      ['ON_DEMAND', null, 'float16'],
      ['AUTOSCALE', 'gpt2#1', 'float16'],
      ['AUTOSCALE', 'gpt2#2', 'float16'],
    ],
  );
  const [first] = await ofType(h, 'DeploymentScaled');
  const because = data<{ because: { numbers: Record<string, number> } }>(first).because.numbers;
  assert.equal(because.thresholdMs, 30_000);
  assert.equal(because.maxReplicas, 3);
  assert.ok(because.oldestWaitMs > 30_000);
  assert.equal(h.state().requests.inFlightByReplica.size, 3, 'each new replica took work at once');
});
