// The commands the application service accepts: the domain's commands without `at` (the time is the command's
// metadata), and where each one goes (stream and decider).
import type { AgentCommand } from '../../domain/agent/commands.js';
import { agentDecider } from '../../domain/agent/decide.js';
import type { DeploymentCommand } from '../../domain/deployment/commands.js';
import { deploymentDecider } from '../../domain/deployment/decide.js';
import type { DomainEvent } from '../../domain/events/types.js';
import type { ModelCommand } from '../../domain/model/commands.js';
import { modelDecider } from '../../domain/model/decide.js';
import type { RequestCommand } from '../../domain/request/commands.js';
import { requestDecider } from '../../domain/request/decide.js';
import type { Decider } from '../../domain/shared/decider.js';
import { DomainErrorCode, refuse } from '../../domain/shared/errors.js';
import {
  agentStream,
  deploymentStream,
  modelKeyOfReplica,
  modelStream,
  requestStream,
} from '../../domain/shared/ids.js';

type WithoutAt<C> = C extends unknown ? Omit<C, 'at'> : never;

export type DomainCommand = RequestCommand | DeploymentCommand | AgentCommand | ModelCommand;
/** A command as callers give it: the domain command without `at`. */
export type ControlPlaneCommand = WithoutAt<DomainCommand>;
export type CommandType = ControlPlaneCommand['type'];

export interface Route {
  streamId: string;
  decider: Decider<DomainCommand, unknown, DomainEvent>;
}

const REQUEST = new Set<string>([
  'SubmitRequest',
  'CancelRequest',
  'DispatchRequest',
  'RequeueRequest',
  'FailRequest',
  'ReportRequestStarted',
  'ReportRequestLog',
  'ReportRequestTokens',
  'ReportRequestTrace',
  'ReportRequestCompleted',
  'ReportRequestFailed',
  'ExpireResult',
]);
const AGENT = new Set<string>([
  'RegisterAgent',
  'ReportAgentHeartbeat',
  'MarkAgentUnresponsive',
  'MarkAgentLost',
  'DrainAgent',
  'CompleteAgentDrain',
]);

/** The stream and decider a command is decided by. */
export function routeOf(c: ControlPlaneCommand): Route {
  if (REQUEST.has(c.type))
    return {
      streamId: requestStream((c as { requestId: string }).requestId),
      decider: requestDecider as unknown as Route['decider'],
    };
  if (AGENT.has(c.type))
    return {
      streamId: agentStream((c as { agentId: string }).agentId),
      decider: agentDecider as unknown as Route['decider'],
    };
  if (c.type === 'RegisterModel' || c.type === 'RemoveModel')
    return { streamId: modelStream(c.modelKey), decider: modelDecider as unknown as Route['decider'] };
  let modelKey: string | undefined = (c as { modelKey?: string }).modelKey;
  if (modelKey === undefined) {
    const replicaId = (c as { replicaId: string }).replicaId;
    modelKey = modelKeyOfReplica(replicaId);
    if (modelKey === undefined)
      refuse(DomainErrorCode.replicaNotFound, `${JSON.stringify(replicaId)} is not a replica id (<modelKey>#<n>)`);
  }
  return { streamId: deploymentStream(modelKey), decider: deploymentDecider as unknown as Route['decider'] };
}
