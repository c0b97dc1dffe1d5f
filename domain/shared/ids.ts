// Names of aggregates and their streams. A replica id carries its model key, so a replica command or an
// `ndif why <replica-id>` finds the deployment stream without a lookup.

export const MODEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/;
export const ENTITY_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** A recorded request id: an entity id, or one scoped to its submitter's key (`<keyId>:<id>`, http/request-ids.ts). */
export const REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,159}$/;

export const requestStream = (requestId: string): string => `request-${requestId}`;
export const deploymentStream = (modelKey: string): string => `deployment-${modelKey}`;
export const agentStream = (agentId: string): string => `agent-${agentId}`;
export const modelStream = (modelKey: string): string => `model-${modelKey}`;

/** The n-th replica (1-based) ever requested for a deployment: `<modelKey>#<n>`. */
export const replicaIdOf = (modelKey: string, n: number): string => `${modelKey}#${n}`;

/** The model key of a replica id, or undefined when the id is not one. */
export function modelKeyOfReplica(replicaId: string): string | undefined {
  const i = replicaId.lastIndexOf('#');
  if (i <= 0 || !/^[1-9][0-9]*$/.test(replicaId.slice(i + 1))) return undefined;
  const key = replicaId.slice(0, i);
  return MODEL_KEY.test(key) ? key : undefined;
}

export type StreamKind = 'request' | 'deployment' | 'agent' | 'model';

/** Which aggregate a stream belongs to and its id, or undefined for streams the control plane does not own. */
export function parseStream(streamId: string): { kind: StreamKind; id: string } | undefined {
  for (const kind of ['request', 'deployment', 'agent', 'model'] as const) {
    if (streamId.startsWith(`${kind}-`)) return { kind, id: streamId.slice(kind.length + 1) };
  }
  return undefined;
}
