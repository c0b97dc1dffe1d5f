// The agent's state machine: ACTIVE, DRAINING, UNRESPONSIVE, LOST, DRAINED, and where an UNRESPONSIVE agent
// resumes (a drain asked for, or under way, before or during the lapse survives it and a re-registration). The
// decider's state and both agent read models (projections/agents, projections/cluster) fold their events with it.
import type { AgentEvent } from '../events/index.js';
import type { AgentStateName } from '../placement/types.js';

export interface AgentLifecycle {
  state: AgentStateName;
  /** The state to return to when an UNRESPONSIVE agent comes back. */
  resumeAs: 'ACTIVE' | 'DRAINING';
}

const NEW_AGENT: AgentLifecycle = { state: 'ACTIVE', resumeAs: 'ACTIVE' };

/** The state after `e`; `prev` is undefined before the agent's first registration. */
export function nextLifecycle(prev: AgentLifecycle | undefined, e: AgentEvent): AgentLifecycle {
  const p = prev ?? NEW_AGENT;
  switch (e.type) {
    case 'AgentRegistered': {
      const draining =
        e.data.previousState === 'DRAINING' || (e.data.previousState === 'UNRESPONSIVE' && p.resumeAs === 'DRAINING');
      return draining ? { state: 'DRAINING', resumeAs: 'DRAINING' } : { state: 'ACTIVE', resumeAs: 'ACTIVE' };
    }
    case 'AgentUnresponsive':
      return { state: 'UNRESPONSIVE', resumeAs: p.state === 'DRAINING' ? 'DRAINING' : 'ACTIVE' };
    case 'AgentReturned':
      return { state: p.resumeAs, resumeAs: p.resumeAs };
    case 'AgentLost':
      return { state: 'LOST', resumeAs: p.resumeAs };
    case 'AgentDrainRequested':
      return { state: p.state === 'UNRESPONSIVE' ? 'UNRESPONSIVE' : 'DRAINING', resumeAs: 'DRAINING' };
    case 'AgentDrained':
      return { state: 'DRAINED', resumeAs: 'ACTIVE' };
    default:
      return p;
  }
}
