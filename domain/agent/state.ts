// State of one agent, folded from its stream.
import type { AgentEvent, GpuSpec } from '../events/index.js';
import type { AgentStateName } from '../placement/types.js';
import { toMs } from '../shared/time.js';
import { nextLifecycle } from './lifecycle.js';

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
  const next = nextLifecycle(s.status === 'NONE' ? undefined : { state: s.status, resumeAs: s.resumeAs }, e);
  const moved = { ...s, status: next.state, resumeAs: next.resumeAs };
  switch (e.type) {
    case 'AgentRegistered':
      return {
        ...moved,
        agentId: e.data.agentId,
        bootId: e.data.bootId,
        gpus: e.data.gpus,
        ramBytes: e.data.ramBytes,
        cpuCacheBudgetBytes: e.data.cpuCacheBudgetBytes,
        lastSeenAtMs: toMs(e.data.registeredAt),
        graceUntilMs: null,
      };
    case 'AgentUnresponsive':
      return { ...moved, lastSeenAtMs: toMs(e.data.lastSeenAt), graceUntilMs: toMs(e.data.graceUntil) };
    case 'AgentReturned':
    case 'AgentLost':
      return { ...moved, graceUntilMs: null };
    case 'AgentDrainRequested':
    case 'AgentDrained':
      return moved;
  }
}
