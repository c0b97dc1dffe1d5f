// State of one agent, folded from its stream.
import type { AgentEvent, GpuSpec } from '../events/index.js';
import type { AgentStateName } from '../placement/types.js';
import { toMs } from '../shared/time.js';

export interface AgentState {
  status: 'NONE' | AgentStateName;
  agentId: string;
  bootId: string;
  gpus: GpuSpec[];
  ramBytes: number;
  cpuCacheBudgetBytes: number;
  lastSeenAtMs: number | null;
  graceUntilMs: number | null;
  /** The state to return to when an UNRESPONSIVE agent comes back (ACTIVE or DRAINING). */
  resumeAs: 'ACTIVE' | 'DRAINING';
}

export function initialAgentState(): AgentState {
  return {
    status: 'NONE',
    agentId: '',
    bootId: '',
    gpus: [],
    ramBytes: 0,
    cpuCacheBudgetBytes: 0,
    lastSeenAtMs: null,
    graceUntilMs: null,
    resumeAs: 'ACTIVE',
  };
}

export function evolveAgent(s: AgentState, e: AgentEvent): AgentState {
  switch (e.type) {
    case 'AgentRegistered': {
      const draining =
        e.data.previousState === 'DRAINING' || (e.data.previousState === 'UNRESPONSIVE' && s.resumeAs === 'DRAINING');
      return {
        ...s,
        status: draining ? 'DRAINING' : 'ACTIVE',
        agentId: e.data.agentId,
        bootId: e.data.bootId,
        gpus: e.data.gpus,
        ramBytes: e.data.ramBytes,
        cpuCacheBudgetBytes: e.data.cpuCacheBudgetBytes,
        lastSeenAtMs: toMs(e.data.registeredAt),
        graceUntilMs: null,
        resumeAs: draining ? 'DRAINING' : 'ACTIVE',
      };
    }
    case 'AgentUnresponsive':
      return {
        ...s,
        status: 'UNRESPONSIVE',
        lastSeenAtMs: toMs(e.data.lastSeenAt),
        graceUntilMs: toMs(e.data.graceUntil),
        resumeAs: s.status === 'DRAINING' ? 'DRAINING' : 'ACTIVE',
      };
    case 'AgentReturned':
      return { ...s, status: s.resumeAs, graceUntilMs: null };
    case 'AgentLost':
      return { ...s, status: 'LOST', graceUntilMs: null };
    case 'AgentDrainRequested':
      return { ...s, status: s.status === 'UNRESPONSIVE' ? 'UNRESPONSIVE' : 'DRAINING', resumeAs: 'DRAINING' };
    case 'AgentDrained':
      return { ...s, status: 'DRAINED', resumeAs: 'ACTIVE' };
  }
}
