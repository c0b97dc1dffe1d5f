// Agent (node) rules in given/when/then form.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentCommand } from '../../domain/agent/commands.js';
import { agentDecider } from '../../domain/agent/decide.js';
import type { AgentState } from '../../domain/agent/state.js';
import type { AgentEvent } from '../../domain/events/index.js';
import { GIB } from '../../domain/placement/size.js';
import { at, T0 } from './fixtures.js';
import { fold, given } from './gwt.js';

const g = (h: AgentEvent[] = []) => given<AgentCommand, AgentState, AgentEvent>(agentDecider, h);
const gpus = [{ index: 0, memoryBytes: 16 * GIB, name: 'virtual' }];
const register = (bootId = 'b1', seconds = 0): AgentCommand => ({
  type: 'RegisterAgent',
  agentId: 'a1',
  bootId,
  gpus,
  ramBytes: 10 * GIB,
  at: at(seconds),
});
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
const unresponsive: AgentEvent = {
  type: 'AgentUnresponsive',
  data: { agentId: 'a1', bootId: 'b1', lastSeenAt: at(2), timeoutMs: 6000, graceUntil: at(38) },
};

describe('agent', () => {
  it('registers its GPUs with a CPU cache budget of 90 % of RAM', () => {
    g().when(register()).then([registered]);
  });
  it('the same registration again is a no-op; a new boot id is a restart naming the previous boot', () => {
    g([registered]).when(register()).then([]);
    g([registered])
      .when(register('b2', 5))
      .thenMatch(([e]) =>
        assert.deepEqual(e.type === 'AgentRegistered' && [e.data.previousBootId, e.data.previousState], [
          'b1',
          'ACTIVE',
        ]),
      );
  });
  it('GPUs with the same index are refused', () => {
    g()
      .when({ ...register(), gpus: [gpus[0], gpus[0]] } as AgentCommand)
      .thenRefused('CP_INVALID_COMMAND');
  });
  it('heartbeats of an active agent store nothing', () => {
    g([registered])
      .when({ type: 'ReportAgentHeartbeat', agentId: 'a1', bootId: 'b1', at: at(1) })
      .then([]);
  });
  it('a lapse makes it unresponsive with a grace period; a heartbeat within it brings it back', () => {
    g([registered])
      .when({
        type: 'MarkAgentUnresponsive',
        agentId: 'a1',
        bootId: 'b1',
        lastSeenAt: at(2),
        timeoutMs: 6000,
        graceMs: 30_000,
        at: at(8),
      })
      .then([unresponsive]);
    g([registered, unresponsive])
      .when({ type: 'ReportAgentHeartbeat', agentId: 'a1', bootId: 'b1', at: at(12) })
      .then([{ type: 'AgentReturned', data: { agentId: 'a1', bootId: 'b1', downMs: 10_000 } }]);
  });
  it('it is lost only once the grace period has passed', () => {
    g([registered, unresponsive])
      .when({ type: 'MarkAgentLost', agentId: 'a1', bootId: 'b1', at: at(37) })
      .then([]);
    g([registered, unresponsive])
      .when({ type: 'MarkAgentLost', agentId: 'a1', bootId: 'b1', at: at(38) })
      .then([
        {
          type: 'AgentLost',
          data: { agentId: 'a1', bootId: 'b1', lastSeenAt: at(2), graceUntil: at(38), lostAt: at(38) },
        },
      ]);
  });
  it('a lost agent must register again; a heartbeat of an old boot is refused', () => {
    const lost: AgentEvent = {
      type: 'AgentLost',
      data: { agentId: 'a1', bootId: 'b1', lastSeenAt: at(2), graceUntil: at(38), lostAt: at(40) },
    };
    g([registered, unresponsive, lost])
      .when({ type: 'ReportAgentHeartbeat', agentId: 'a1', bootId: 'b1', at: at(41) })
      .thenRefused('CP_AGENT_LOST');
    g([registered])
      .when({ type: 'ReportAgentHeartbeat', agentId: 'a1', bootId: 'b0', at: at(41) })
      .thenRefused('CP_AGENT_BOOT_MISMATCH');
    assert.equal(
      fold(agentDecider, [
        registered,
        unresponsive,
        lost,
        ...g([registered, unresponsive, lost])
          .when(register('b2', 50))
          .thenMatch(() => undefined),
      ]).status,
      'ACTIVE',
    );
  });
  it('drain is requested once and completed by the scheduler; a draining agent stays draining across a restart', () => {
    const drain: AgentEvent = { type: 'AgentDrainRequested', data: { agentId: 'a1', by: 'op' } };
    g([registered])
      .when({ type: 'DrainAgent', agentId: 'a1', actor: 'op', at: at(1) })
      .then([drain]);
    g([registered, drain])
      .when({ type: 'DrainAgent', agentId: 'a1', actor: 'op', at: at(1) })
      .then([]);
    g([registered, drain])
      .when({ type: 'CompleteAgentDrain', agentId: 'a1', at: at(2) })
      .then([{ type: 'AgentDrained', data: { agentId: 'a1' } }]);
    const restarted = g([registered, drain])
      .when(register('b2', 3))
      .thenMatch(() => undefined);
    assert.equal(fold(agentDecider, [registered, drain, ...restarted]).status, 'DRAINING');
  });
  it('commands for an unknown agent are refused', () => {
    g().when({ type: 'DrainAgent', agentId: 'a1', actor: 'op', at: T0 }).thenRefused('CP_AGENT_NOT_FOUND');
  });
});
