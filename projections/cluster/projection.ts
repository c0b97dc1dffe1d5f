// The cluster projection for the projection runner.
import type { JsonValue } from '../../eventstore/port.js';
import type { Projection } from '../runner/projection.js';
import { applyCluster } from './apply.js';
import { emptyClusterIndex, rebuildClusterIndex } from './index-state.js';
import {
  initialClusterState,
  type ClusterAgent,
  type ClusterDeployment,
  type ClusterReplica,
  type ClusterState,
} from './state.js';

export const CLUSTER_PROJECTION_VERSION = 1;

export function clusterToSnapshot(s: ClusterState): JsonValue {
  return {
    agents: [...s.agents.values()],
    deployments: [...s.deployments.values()],
    replicas: [...s.replicas.values()],
  } as unknown as JsonValue;
}

export function clusterFromSnapshot(j: JsonValue): ClusterState {
  const o = j as unknown as { agents: ClusterAgent[]; deployments: ClusterDeployment[]; replicas: ClusterReplica[] };
  const s: ClusterState = {
    agents: new Map(o.agents.map((a) => [a.agentId, a])),
    deployments: new Map(o.deployments.map((d) => [d.modelKey, d])),
    replicas: new Map(o.replicas.map((r) => [r.replicaId, r])),
    index: emptyClusterIndex(),
  };
  rebuildClusterIndex(s);
  return s;
}

export const clusterProjection: Projection<ClusterState> = {
  name: 'cluster',
  version: CLUSTER_PROJECTION_VERSION,
  initialState: initialClusterState,
  apply: applyCluster,
  toSnapshot: clusterToSnapshot,
  fromSnapshot: clusterFromSnapshot,
};
