// Errors of the GPU agent; codes are listed in docs/errors.md ("GPU agent, relay and catalog").
import { FabricError } from '../../protocol/errors.js';

export const AgentErrorCode = {
  ConfigInvalid: 'AGENT_CONFIG_INVALID',
  ReplicaNotLoaded: 'AGENT_REPLICA_NOT_LOADED',
  SandboxUnavailable: 'AGENT_SANDBOX_UNAVAILABLE',
  PayloadUnavailable: 'AGENT_PAYLOAD_UNAVAILABLE',
  ResultTooLarge: 'RESULT_TOO_LARGE',
} as const;

export function agentConfigInvalid(variable: string, value: string, accepts: string): FabricError {
  return new FabricError(AgentErrorCode.ConfigInvalid, 500, `${variable}=${JSON.stringify(value)} is not valid: ${accepts}`, {
    hint: `fix ${variable} or unset it for the default`,
    details: { variable, value },
  });
}
