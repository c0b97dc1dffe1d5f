// Fencing of leader-issued commands: an aggregate remembers the highest leader epoch among its events and refuses
// a command from an older epoch (CP_LEADER_EPOCH_STALE), deciding nothing; commands without an epoch (users,
// operators, agents) are not fenced.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentCommand } from '../../domain/agent/commands.js';
import { agentDecider } from '../../domain/agent/decide.js';
import type { AgentEvent } from '../../domain/events/index.js';
import { GIB } from '../../domain/placement/size.js';
import { isDomainError } from '../../domain/shared/errors.js';
import { fenced, type Stamped } from '../../domain/shared/fencing.js';
import { at, T0 } from './fixtures.js';

const decider = fenced(agentDecider);
const gpus = [{ index: 0, memoryBytes: 16 * GIB, name: 'virtual' }];
const registered: AgentEvent = {
  type: 'AgentRegistered',
  data: {
    agentId: 'a1',
    bootId: 'b1',
    gpus,
    ramBytes: 10 * GIB,
    cpuCacheBudgetBytes: 9 * GIB,
    registeredAt: T0,
    previousBootId: null,
    previousState: null,
  },
};
const markUnresponsive = (leaderEpoch?: number): AgentCommand & { leaderEpoch?: number } => ({
  type: 'MarkAgentUnresponsive',
  agentId: 'a1',
  bootId: 'b1',
  lastSeenAt: at(2),
  timeoutMs: 6000,
  graceMs: 30_000,
  at: at(10),
  ...(leaderEpoch === undefined ? {} : { leaderEpoch }),
});

function state(history: Stamped<AgentEvent>[]) {
  let s = decider.initialState();
  for (const e of history) s = decider.evolve(s, e);
  return s;
}

describe('fencing', () => {
  it('remembers the highest leader epoch of the stream', () => {
    assert.equal(state([]).epoch, 0);
    assert.equal(state([{ event: registered }]).epoch, 0);
    assert.equal(state([{ event: registered, leaderEpoch: 3 }]).epoch, 3);
    assert.equal(
      state([
        { event: registered, leaderEpoch: 3 },
        { event: registered, leaderEpoch: 2 },
      ]).epoch,
      3,
    );
  });

  it('decides as the aggregate does for the current epoch or a newer one, and stamps the events with it', () => {
    const s = state([{ event: registered, leaderEpoch: 2 }]);
    for (const epoch of [2, 5]) {
      const events = decider.decide(markUnresponsive(epoch), s);
      assert.equal(events.length, 1);
      assert.equal(events[0].event.type, 'AgentUnresponsive');
      assert.equal(events[0].leaderEpoch, epoch);
      assert.deepEqual(
        events.map((e) => e.event),
        agentDecider.decide(markUnresponsive(), state([{ event: registered }]).inner),
      );
    }
  });

  it('refuses a command from an older epoch with CP_LEADER_EPOCH_STALE, deciding nothing', () => {
    const s = state([{ event: registered, leaderEpoch: 4 }]);
    assert.throws(
      () => decider.decide(markUnresponsive(3), s),
      (e: unknown) =>
        isDomainError(e) &&
        e.code === 'CP_LEADER_EPOCH_STALE' &&
        e.httpStatus === 409 &&
        /epoch 3/.test(e.message) &&
        /epoch 4/.test(e.message),
    );
  });

  it('does not fence commands without an epoch (users, operators, agents)', () => {
    const s = state([{ event: registered, leaderEpoch: 4 }]);
    const events = decider.decide(markUnresponsive(), s);
    assert.equal(events.length, 1);
    assert.equal(events[0].leaderEpoch, undefined);
  });
});
