// The control plane's commands, one const list of types per aggregate. Each list is checked against its aggregate's
// command union both ways at compile time: a name that is not one of the aggregate's commands, or a command of the
// union that the list leaves out, does not compile (the error names the missing command). The command API routes a
// command by the list its type is in (command-api/handlers/commands.ts).
import type { AgentCommand } from './agent/commands.js';
import type { DeploymentCommand } from './deployment/commands.js';
import type { ModelCommand } from './model/commands.js';
import type { RequestCommand } from './request/commands.js';

/** Passes `list` through when it names every member of `U`; otherwise the argument's type asks for `missing`. */
export const everyOf =
  <U extends string>() =>
  <const L extends readonly U[]>(
    list: L & ([Exclude<U, L[number]>] extends [never] ? unknown : { missing: Exclude<U, L[number]> }),
  ): L =>
    list;

export const REQUEST_COMMANDS = everyOf<RequestCommand['type']>()([
  'SubmitRequest',
  'CancelRequest',
  'DispatchRequest',
  'RequeueRequest',
  'FailRequest',
  'ReportRequestStarted',
  'ReportRequestLog',
  'ReportRequestTokens',
  'ReportRequestTrace',
  'ReportRequestResultWriting',
  'ReportRequestCompleted',
  'ReportRequestFailed',
  'ExpireResult',
]);

export const AGENT_COMMANDS = everyOf<AgentCommand['type']>()([
  'RegisterAgent',
  'ReportAgentHeartbeat',
  'MarkAgentUnresponsive',
  'MarkAgentLost',
  'DrainAgent',
  'CompleteAgentDrain',
]);

export const MODEL_COMMANDS = everyOf<ModelCommand['type']>()([
  'RegisterModel',
  'RemoveModel',
  'DisableModel',
  'EnableModel',
  'RegisterModelEdit',
  'RemoveModelEdit',
]);

export const DEPLOYMENT_COMMANDS = everyOf<DeploymentCommand['type']>()([
  'RequestDeployment',
  'ScaleDeployment',
  'AutoscaleDeployment',
  'PlaceReplica',
  'RefuseReplica',
  'DemoteReplica',
  'EvictReplica',
  'EvictDeployment',
  'CompleteReplicaEviction',
  'CompleteReplicaDemotion',
  'ReleaseAgentReplicas',
  'PinDeployment',
  'ReportReplicaLoading',
  'ReportReplicaHot',
  'ReportReplicaFailed',
]);

type WithoutAt<C> = C extends unknown ? Omit<C, 'at'> : never;

export type DomainCommand = RequestCommand | DeploymentCommand | AgentCommand | ModelCommand;
/** A command as callers give it: the domain command without `at` (the time is the command's metadata). */
export type ControlPlaneCommand = WithoutAt<DomainCommand>;
export type CommandType = ControlPlaneCommand['type'];

const isIn =
  <T extends string>(list: readonly T[]) =>
  (c: ControlPlaneCommand): c is Extract<ControlPlaneCommand, { type: T }> =>
    (list as readonly string[]).includes(c.type);

export const isRequestCommand = isIn(REQUEST_COMMANDS);
export const isAgentCommand = isIn(AGENT_COMMANDS);
export const isModelCommand = isIn(MODEL_COMMANDS);
export const isDeploymentCommand = isIn(DEPLOYMENT_COMMANDS);
