// The soak's one tolerated refusal (tests/soak/driver.ts): a request failed by a placement refused while no agent was
// ACTIVE is an outcome of its kills; a refusal with an ACTIVE agent among its candidates, or another error, is not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { StoredEvent } from '../../eventstore/port.js';
import { refusedWhileAgentDown } from './driver.js';

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
