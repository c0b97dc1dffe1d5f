// Which events of the log become assignments, and for which agent: a fold over the log that remembers where
// each replica is (agent and boot) and where each request is running, because most of these events do not name
// the agent themselves (ReplicaRemoved, RequestCancelled…). It mutates its state in place (as projections do) and
// is free of I/O; a `run` draft still needs the request's payload, which the relay reads from the request's stream.
//
// | event                         | assignment | to                                                   |
// |-------------------------------|------------|------------------------------------------------------|
// | ReplicaPlaced                 | load PLACED  | the agent and boot it names                        |
// | ReplicaRestored               | load RESTORE | the agent and boot it names (the WARM copy there)  |
// | ReplicaReloadRequired         | load RELOAD  | the agent and its new boot                         |
// | ReplicaDemoted                | demote     | the agent holding the replica                        |
// | ReplicaRemoved, ReplicaFailed | unload     | the agent holding the replica (none: never placed)   |
// | RequestDispatched             | run        | the agent it names, for the boot of its replica      |
// | RequestCancelled              | abort      | the agent running the attempt, if one is             |
// | RequestRequeued               | abort      | the agent running the interrupted attempt            |
// | RequestFailed (scheduler)     | abort      | the agent running the attempt (a timeout)            |
// | ModelRegistered / ModelRemoved | —         | remembered: a load names the registered files        |
// | ReplicaRequested (int8, int4) | —          | remembered: a load says to quantize the weights      |
// Everything else (requests received, queued, started, logged, completed; agent health; deployments) only
// updates this state or nothing.
import type { StoredEvent } from '../../eventstore/port.js';
import type { Assignment, AssignmentBase, RegisteredFiles } from './wire.js';

export interface RelayState {
  /** Current boot of every registered agent. */
  agents: Record<string, string>;
  /** Replicas on an agent (placed, loading, HOT, demoting, WARM, unloading). */
  replicas: Record<string, { agentId: string; bootId: string; modelKey: string; gpus: number[]; bytesPerGpu: number }>;
  /** Attempts dispatched and not finished. */
  inFlight: Record<string, { agentId: string; bootId: string; attempt: number; replicaId: string }>;
  /** The files each registered model key names (checkpoints written before models were events have none). */
  models?: Record<string, RegisteredFiles>;
  /** Replicas whose deployment quantizes the weights at load (ReplicaRequested with dtype int8 or int4). */
  quantized?: Record<string, 'int8' | 'int4'>;
}

export function initialRelayState(): RelayState {
  return { agents: {}, replicas: {}, inFlight: {}, models: {} };
}

type Without<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
/** An assignment without the fields the relay adds (version, position, event id, correlation); a run without its payload. */
export type Draft = Without<Assignment, keyof AssignmentBase | 'payload' | 'payloadBlob' | 'trusted' | 'options'> & {
  agentId: string;
  bootId: string;
};

type Data = Record<string, unknown>;

/** The assignments `event` makes, after updating `state`. */
export function route(state: RelayState, event: StoredEvent): Draft[] {
  const d = event.data as Data;
  switch (event.type) {
    case 'AgentRegistered':
      state.agents[d.agentId as string] = d.bootId as string;
      return [];
    case 'ModelRegistered':
      state.models ??= {};
      state.models[d.modelKey as string] = { fingerprint: d.fingerprint as string, dir: d.dir as string };
      return [];
    case 'ModelRemoved':
      if (state.models) delete state.models[d.modelKey as string];
      return [];
    case 'ReplicaRequested': {
      const dtype = (d.settings as { dtype?: string } | undefined)?.dtype;
      if (dtype === 'int8' || dtype === 'int4') {
        state.quantized ??= {};
        state.quantized[d.replicaId as string] = dtype;
      }
      return [];
    }
    case 'ReplicaPlaced':
    case 'ReplicaRestored':
    case 'ReplicaReloadRequired': {
      const replicaId = d.replicaId as string;
      const agentId = d.agentId as string;
      const bootId = d.bootId as string;
      const modelKey = d.modelKey as string;
      const prev = state.replicas[replicaId];
      const reason =
        event.type === 'ReplicaPlaced' ? 'PLACED' : event.type === 'ReplicaRestored' ? 'RESTORE' : 'RELOAD';
      // A reload keeps the replica's GPUs; the event does not repeat them.
      const gpus = (d.gpus as number[] | undefined) ?? prev?.gpus ?? [];
      const bytesPerGpu = (d.bytesPerGpu as number | undefined) ?? prev?.bytesPerGpu ?? 0;
      state.replicas[replicaId] = { agentId, bootId, modelKey, gpus, bytesPerGpu };
      const model = state.models?.[modelKey];
      const quantize = state.quantized?.[replicaId];
      return [
        {
          kind: 'load',
          agentId,
          bootId,
          replicaId,
          modelKey,
          gpus,
          bytesPerGpu,
          reason,
          ...(model === undefined ? {} : { model: { ...model } }),
          ...(quantize === undefined ? {} : { quantize }),
        },
      ];
    }
    case 'ReplicaDemoted': {
      const r = state.replicas[d.replicaId as string];
      if (r === undefined) return [];
      return [
        {
          kind: 'demote',
          agentId: r.agentId,
          bootId: r.bootId,
          replicaId: d.replicaId as string,
          modelKey: r.modelKey,
        },
      ];
    }
    case 'ReplicaRemoved':
    case 'ReplicaFailed': {
      const replicaId = d.replicaId as string;
      const r = state.replicas[replicaId];
      if (state.quantized) delete state.quantized[replicaId];
      if (r === undefined) return [];
      delete state.replicas[replicaId];
      const reason = event.type === 'ReplicaFailed' ? 'FAILED' : (d.reason as string);
      return [{ kind: 'unload', agentId: r.agentId, bootId: r.bootId, replicaId, modelKey: r.modelKey, reason }];
    }
    case 'RequestDispatched': {
      const requestId = d.requestId as string;
      const agentId = d.agentId as string;
      const replicaId = d.replicaId as string;
      const attempt = d.attempt as number;
      const bootId = state.replicas[replicaId]?.bootId ?? state.agents[agentId] ?? '';
      state.inFlight[requestId] = { agentId, bootId, attempt, replicaId };
      return [
        {
          kind: 'run',
          agentId,
          bootId,
          requestId,
          attempt,
          replicaId,
          modelKey: d.modelKey as string,
          ...(d.isolated === true ? { isolated: true } : {}),
        },
      ];
    }
    case 'RequestCompleted':
      return finish(state, d, null);
    case 'RequestFailed':
      return finish(state, d, d.reportedBy === 'scheduler' ? 'FAILED' : null);
    case 'RequestRequeued':
      return finish(state, d, 'REQUEUED');
    case 'RequestCancelled':
      return finish(state, d, 'CANCELLED');
    default:
      return [];
  }
}

function finish(state: RelayState, d: Data, abort: 'CANCELLED' | 'FAILED' | 'REQUEUED' | null): Draft[] {
  const requestId = d.requestId as string;
  const f = state.inFlight[requestId];
  if (f === undefined || (abort !== 'CANCELLED' && d.attempt !== f.attempt)) return [];
  delete state.inFlight[requestId];
  if (abort === null) return [];
  return [{ kind: 'abort', agentId: f.agentId, bootId: f.bootId, requestId, attempt: f.attempt, reason: abort }];
}
