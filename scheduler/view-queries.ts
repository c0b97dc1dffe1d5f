// Lookups over the control plane's read models that several scheduler rules share.
import type { ClusterReplica } from '../projections/cluster/state.js';
import type { ControlPlaneState } from '../projections/control-plane/state.js';
import type { RequestView } from '../projections/requests/state.js';

export const LIVE_STATES = new Set(['REQUESTED', 'PLACED', 'LOADING', 'HOT']);
export const ON_AGENT_STATES = new Set(['PLACED', 'LOADING', 'HOT', 'DEMOTING', 'UNLOADING', 'WARM']);

export function inFlightOn(s: ControlPlaneState, replicaId: string): RequestView[] {
  const ids = s.requests.inFlightByReplica.get(replicaId);
  if (ids === undefined) return [];
  return [...ids].map((id) => s.requests.byId.get(id)!);
}

export function replicasOnAgent(s: ControlPlaneState, agentId: string): ClusterReplica[] {
  const out: ClusterReplica[] = [];
  for (const id of s.cluster.index.onAgent.get(agentId) ?? []) out.push(s.cluster.replicas.get(id)!);
  return out.sort((a, b) => a.requestedPosition - b.requestedPosition);
}

export function byId<T>(key: (t: T) => string): (a: T, b: T) => number {
  return (a, b) => {
    const x = key(a);
    const y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  };
}
