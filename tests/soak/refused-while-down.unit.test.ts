// The soak's tolerated failures besides the blocks' own throws (tests/soak/driver.ts): a placement refused while no
// agent was ACTIVE, and TooManyAttempts after attempts its kills and evictions ended, are outcomes of its chaos; a
// refusal with an ACTIVE candidate, or attempts ended otherwise, are not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { StoredEvent } from '../../eventstore/port.js';
import { refusedWhileAgentDown, requeuedOutByChaos } from './driver.js';

const refusal = (excluded: Array<string | null>): StoredEvent =>
  ({
    id: 'ev-1',
    type: 'DeploymentRefused',
    data: { candidates: excluded.map((x, i) => ({ agentId: `a${i}`, excluded: x })) },
  }) as unknown as StoredEvent;
const failed = { errorType: 'DeploymentRefused', because: { refs: { eventId: 'ev-1' } } };

test('a refusal whose every candidate is not ACTIVE (or that had none) is the kills; any ACTIVE candidate is not', () => {
  const down = new Map([['ev-1', refusal(['agent is UNRESPONSIVE, not ACTIVE'])]]);
  assert.equal(refusedWhileAgentDown(failed, down), true);
  assert.equal(refusedWhileAgentDown(failed, new Map([['ev-1', refusal([])]])), true);
  assert.equal(refusedWhileAgentDown(failed, new Map([['ev-1', refusal([null])]])), false);
  assert.equal(
    refusedWhileAgentDown(failed, new Map([['ev-1', refusal(['agent is LOST, not ACTIVE', 'no room'])]])),
    false,
  );
  assert.equal(refusedWhileAgentDown({ ...failed, errorType: 'BlockError' }, down), false);
  assert.equal(refusedWhileAgentDown({ ...failed, because: null }, down), false);
});

test('TooManyAttempts after attempts ended by kills and evictions is the chaos; after a failed replica it is not', () => {
  const requeued = (reason: string) => ({ type: 'RequestRequeued', data: { reason } }) as unknown as StoredEvent;
  const failed = { errorType: 'TooManyAttempts' };
  assert.equal(requeuedOutByChaos(failed, [requeued('PREEMPTED'), requeued('AGENT_RESTARTED')]), true);
  assert.equal(requeuedOutByChaos(failed, [requeued('PREEMPTED'), requeued('REPLICA_FAILED')]), false);
  assert.equal(requeuedOutByChaos(failed, []), false);
  assert.equal(requeuedOutByChaos({ errorType: 'BlockError' }, [requeued('PREEMPTED')]), false);
});
