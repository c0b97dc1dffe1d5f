// The agent's state machine (domain/agent/lifecycle.ts), which the decider and both agent read models fold with.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AgentLifecycle, nextLifecycle } from '../../domain/agent/lifecycle.js';
import type { AgentEvent } from '../../domain/events/index.js';

const ev = (type: AgentEvent['type'], data: Record<string, unknown> = {}): AgentEvent =>
  ({ type, data: { agentId: 'a', ...data } }) as unknown as AgentEvent;
const fold = (events: AgentEvent[], from?: AgentLifecycle): AgentLifecycle | undefined =>
  events.reduce<AgentLifecycle | undefined>((s, e) => nextLifecycle(s, e), from);

test('a first registration is ACTIVE; a drain then a lapse returns DRAINING', () => {
  assert.deepEqual(fold([ev('AgentRegistered')]), { state: 'ACTIVE', resumeAs: 'ACTIVE' });
  assert.deepEqual(fold([ev('AgentRegistered'), ev('AgentDrainRequested'), ev('AgentUnresponsive')]), {
    state: 'UNRESPONSIVE',
    resumeAs: 'DRAINING',
  });
  assert.deepEqual(
    fold([ev('AgentRegistered'), ev('AgentDrainRequested'), ev('AgentUnresponsive'), ev('AgentReturned')]),
    { state: 'DRAINING', resumeAs: 'DRAINING' },
  );
});

test('a drain asked for during a lapse leaves it UNRESPONSIVE and is resumed, also by a re-registration', () => {
  const lapsed = fold([ev('AgentRegistered'), ev('AgentUnresponsive'), ev('AgentDrainRequested')]);
  assert.deepEqual(lapsed, { state: 'UNRESPONSIVE', resumeAs: 'DRAINING' });
  assert.deepEqual(nextLifecycle(lapsed, ev('AgentRegistered', { previousState: 'UNRESPONSIVE' })), {
    state: 'DRAINING',
    resumeAs: 'DRAINING',
  });
  assert.deepEqual(nextLifecycle(lapsed, ev('AgentRegistered', { previousState: 'LOST' })), {
    state: 'ACTIVE',
    resumeAs: 'ACTIVE',
  });
});

test('drained and lost are terminal until the next registration', () => {
  const drained = fold([ev('AgentRegistered'), ev('AgentDrainRequested'), ev('AgentDrained')]);
  assert.deepEqual(drained, { state: 'DRAINED', resumeAs: 'ACTIVE' });
  assert.deepEqual(fold([ev('AgentRegistered'), ev('AgentUnresponsive'), ev('AgentLost')]), {
    state: 'LOST',
    resumeAs: 'ACTIVE',
  });
  assert.deepEqual(nextLifecycle(drained, ev('AgentRegistered', { previousState: 'DRAINING' })), {
    state: 'DRAINING',
    resumeAs: 'DRAINING',
  });
});
