// The agent health read model: each agent's state, when it changed, its grace deadline, restarts and lapses.
import type { AgentStateName } from '../../domain/placement/types.js';
import type { JsonValue, StoredEvent } from '../../eventstore/port.js';
import { atMs as toMs, decode, refOf, type EventRef } from '../decode.js';
import type { DomainEvent } from '../../domain/events/types.js';
import type { Projection } from '../runner/projection.js';
import { nextLifecycle } from '../../domain/agent/lifecycle.js';

export interface AgentHealth {
  agentId: string;
  bootId: string;
  state: AgentStateName;
  /** The state an UNRESPONSIVE agent returns to. */
  resumeAs: 'ACTIVE' | 'DRAINING';
  registeredAtMs: number;
  /** The last time the agent was known alive from the log (registration, or the last beat before a lapse). */
  lastSeenAtMs: number;
  sinceMs: number;
  graceUntilMs: number | null;
  restarts: number;
  lapses: number;
  returns: number;
  /** The last state changes, newest last (at most 20). */
  history: { state: AgentStateName; atMs: number; event: EventRef }[];
}

export interface AgentsState {
  byId: Map<string, AgentHealth>;
}

const HISTORY = 20;

export function initialAgentsState(): AgentsState {
  return { byId: new Map() };
}

function change(a: AgentHealth, state: AgentStateName, e: StoredEvent, ref: EventRef): void {
  a.state = state;
  a.sinceMs = toMs(e.metadata.at);
  a.history.push({ state, atMs: a.sinceMs, event: ref });
  if (a.history.length > HISTORY) a.history.shift();
}

export function applyAgents(
  s: AgentsState,
  e: StoredEvent,
  d: DomainEvent | undefined = decode(e),
  ref?: EventRef,
): AgentsState {
  if (d === undefined) return s;
  switch (d.type) {
    case 'AgentRegistered': {
      const prev = s.byId.get(d.data.agentId);
      const at = toMs(d.data.registeredAt);
      const a: AgentHealth = prev ?? {
        agentId: d.data.agentId,
        bootId: d.data.bootId,
        state: 'ACTIVE',
        resumeAs: 'ACTIVE',
        registeredAtMs: at,
        lastSeenAtMs: at,
        sinceMs: at,
        graceUntilMs: null,
        restarts: 0,
        lapses: 0,
        returns: 0,
        history: [],
      };
      const next = nextLifecycle(prev, d);
      if (prev !== undefined && prev.bootId !== d.data.bootId) a.restarts++;
      a.bootId = d.data.bootId;
      a.registeredAtMs = at;
      a.lastSeenAtMs = at;
      a.graceUntilMs = null;
      a.resumeAs = next.resumeAs;
      change(a, next.state, e, ref ?? refOf(e));
      s.byId.set(a.agentId, a);
      return s;
    }
    case 'AgentUnresponsive':
    case 'AgentReturned':
    case 'AgentLost':
    case 'AgentDrainRequested':
    case 'AgentDrained': {
      const a = s.byId.get(d.data.agentId);
      if (a === undefined)
        throw new Error(`${e.type} at position ${e.position} names agent ${d.data.agentId}, which never registered`);
      const next = nextLifecycle(a, d);
      if (d.type === 'AgentUnresponsive') {
        a.lapses++;
        a.lastSeenAtMs = toMs(d.data.lastSeenAt);
        a.graceUntilMs = toMs(d.data.graceUntil);
      } else if (d.type === 'AgentReturned') {
        a.returns++;
        a.graceUntilMs = null;
      } else if (d.type === 'AgentLost') a.graceUntilMs = null;
      a.resumeAs = next.resumeAs;
      // A drain asked for during a lapse is no change of state (it shows when the agent returns).
      if (d.type !== 'AgentDrainRequested' || a.state !== 'UNRESPONSIVE') change(a, next.state, e, ref ?? refOf(e));
      return s;
    }
    default:
      return s;
  }
}

export const AGENTS_PROJECTION_VERSION = 1;

export const agentsProjection: Projection<AgentsState> = {
  name: 'agents',
  version: AGENTS_PROJECTION_VERSION,
  initialState: initialAgentsState,
  apply: applyAgents,
  toSnapshot: (s) => [...s.byId.values()] as unknown as JsonValue,
  fromSnapshot: (j) => ({ byId: new Map((j as unknown as AgentHealth[]).map((a) => [a.agentId, a])) }),
};
