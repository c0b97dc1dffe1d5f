// Where each command goes (stream and decider). The command lists and their unions are the domain's
// (domain/commands.ts): every command type is in exactly its aggregate's list, checked by the compiler.
import {
  type ControlPlaneCommand,
  type DomainCommand,
  isAgentCommand,
  isModelCommand,
  isRequestCommand,
} from '../../domain/commands.js';
import { agentDecider } from '../../domain/agent/decide.js';
import { deploymentDecider } from '../../domain/deployment/decide.js';
import type { DomainEvent } from '../../domain/events/types.js';
import { modelDecider } from '../../domain/model/decide.js';
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

export type { CommandType, ControlPlaneCommand, DomainCommand } from '../../domain/commands.js';

export interface Route {
  streamId: string;
  decider: Decider<DomainCommand, unknown, DomainEvent>;
}

/** The stream and decider a command is decided by. */
export function routeOf(c: ControlPlaneCommand): Route {
  if (isRequestCommand(c)) return { streamId: requestStream(c.requestId), decider: requestDecider };
  if (isAgentCommand(c)) return { streamId: agentStream(c.agentId), decider: agentDecider };
  if (isModelCommand(c)) return { streamId: modelStream(c.modelKey), decider: modelDecider };
  if ('modelKey' in c) return { streamId: deploymentStream(c.modelKey), decider: deploymentDecider };
  const modelKey = modelKeyOfReplica(c.replicaId);
  if (modelKey === undefined)
    refuse(DomainErrorCode.replicaNotFound, `${JSON.stringify(c.replicaId)} is not a replica id (<modelKey>#<n>)`);
  return { streamId: deploymentStream(modelKey), decider: deploymentDecider };
}
