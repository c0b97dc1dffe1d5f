// The agent decider: registration (a new boot id is a restart), heartbeats that only record state changes,
// the scheduler's unresponsive → lost decisions (with a grace period in between), and drain.
import type { AgentEvent } from '../events/index.js';
import type { Decider } from '../shared/decider.js';
import { DomainErrorCode as C, refuse } from '../shared/errors.js';
import { toIso, toMs } from '../shared/time.js';
import type { AgentCommand, RegisterAgent } from './commands.js';
import { evolveAgent, initialAgentState, type AgentState } from './state.js';

export const CPU_CACHE_SHARE = 0.9;

function sameGpus(a: RegisterAgent['gpus'], b: RegisterAgent['gpus']): boolean {
  return (
    a.length === b.length &&
    a.every((g, i) => g.index === b[i].index && g.memoryBytes === b[i].memoryBytes && g.name === b[i].name)
  );
}

function register(c: RegisterAgent, s: AgentState): AgentEvent[] {
  const indexes = new Set(c.gpus.map((g) => g.index));
  if (c.gpus.length === 0 || indexes.size !== c.gpus.length) {
    refuse(
      C.invalidCommand,
      `agent ${c.agentId} must declare at least one GPU, each with a distinct index`,
      'declare GPUs as [{ index: 0, memoryBytes, name }, …]',
    );
  }
  if (!Number.isSafeInteger(c.ramBytes) || c.ramBytes < 0) refuse(C.invalidCommand, 'ramBytes must be an integer >= 0');
  const budget = c.cpuCacheBudgetBytes ?? Math.floor(c.ramBytes * CPU_CACHE_SHARE);
  if (!Number.isSafeInteger(budget) || budget < 0 || budget > c.ramBytes) {
    refuse(
      C.invalidCommand,
      `cpuCacheBudgetBytes must be an integer from 0 to ramBytes (${c.ramBytes}), got ${budget}`,
    );
  }
  const gpus = [...c.gpus].sort((a, b) => a.index - b.index);
  if (s.status !== 'NONE' && s.bootId === c.bootId) {
    if (s.status === 'UNRESPONSIVE')
      return [
        {
          type: 'AgentReturned',
          data: {
            agentId: c.agentId,
            bootId: c.bootId,
            downMs: Math.max(0, toMs(c.at) - (s.lastSeenAtMs ?? toMs(c.at))),
          },
        },
      ];
    if (s.status !== 'LOST' && sameGpus(s.gpus, gpus) && s.ramBytes === c.ramBytes && s.cpuCacheBudgetBytes === budget)
      return [];
  }
  return [
    {
      type: 'AgentRegistered',
      data: {
        agentId: c.agentId,
        bootId: c.bootId,
        gpus,
        ramBytes: c.ramBytes,
        cpuCacheBudgetBytes: budget,
        registeredAt: c.at,
        previousBootId: s.status === 'NONE' ? null : s.bootId,
        previousState: s.status === 'NONE' ? null : s.status,
        ...(c.previousExit !== undefined && s.status !== 'NONE' && c.previousExit.bootId === s.bootId
          ? { previousExit: c.previousExit }
          : {}),
      },
    },
  ];
}

export function decideAgent(c: AgentCommand, s: AgentState): AgentEvent[] {
  if (c.type === 'RegisterAgent') return register(c, s);
  if (s.status === 'NONE')
    refuse(
      C.agentNotFound,
      `agent ${c.agentId} is not registered`,
      'the agent registers itself with its GPUs when it starts',
    );
  switch (c.type) {
    case 'ReportAgentHeartbeat':
      if (s.status === 'LOST')
        refuse(
          C.agentLost,
          `agent ${c.agentId} was declared lost; its replicas were removed`,
          'register again (restart the agent)',
        );
      if (c.bootId !== s.bootId)
        refuse(
          C.agentBootMismatch,
          `agent ${c.agentId} is registered with boot ${s.bootId}, the heartbeat is from boot ${c.bootId}`,
          'register again after a restart',
        );
      if (s.status !== 'UNRESPONSIVE') return [];
      return [
        {
          type: 'AgentReturned',
          data: {
            agentId: c.agentId,
            bootId: c.bootId,
            downMs: Math.max(0, toMs(c.at) - (s.lastSeenAtMs ?? toMs(c.at))),
          },
        },
      ];
    case 'MarkAgentUnresponsive':
      if ((s.status !== 'ACTIVE' && s.status !== 'DRAINING') || s.bootId !== c.bootId) return [];
      return [
        {
          type: 'AgentUnresponsive',
          data: {
            agentId: c.agentId,
            bootId: c.bootId,
            lastSeenAt: c.lastSeenAt,
            timeoutMs: c.timeoutMs,
            graceUntil: toIso(toMs(c.at) + c.graceMs),
          },
        },
      ];
    case 'MarkAgentLost':
      if (s.status !== 'UNRESPONSIVE' || s.bootId !== c.bootId || toMs(c.at) < (s.graceUntilMs ?? 0)) return [];
      return [
        {
          type: 'AgentLost',
          data: {
            agentId: c.agentId,
            bootId: c.bootId,
            lastSeenAt: toIso(s.lastSeenAtMs!),
            graceUntil: toIso(s.graceUntilMs!),
            lostAt: c.at,
          },
        },
      ];
    case 'DrainAgent':
      if (s.status === 'LOST') refuse(C.agentWrongState, `agent ${c.agentId} is lost; there is nothing to drain`);
      if (s.status === 'DRAINING' || s.status === 'DRAINED' || s.resumeAs === 'DRAINING') return [];
      return [{ type: 'AgentDrainRequested', data: { agentId: c.agentId, by: c.actor } }];
    case 'CompleteAgentDrain':
      return s.status === 'DRAINING' ? [{ type: 'AgentDrained', data: { agentId: c.agentId } }] : [];
  }
}

export const agentDecider: Decider<AgentCommand, AgentState, AgentEvent> = {
  initialState: initialAgentState,
  evolve: evolveAgent,
  decide: decideAgent,
};
