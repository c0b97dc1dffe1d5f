// Refusals of the control plane's deciders (listed in docs/errors.md, "Control plane" → "Domain").
// A refused command appends nothing.
import { FabricError } from '../../protocol/errors.js';

export const DomainErrorCode = {
  invalidCommand: 'CP_INVALID_COMMAND',
  requestExists: 'CP_REQUEST_EXISTS',
  requestNotFound: 'CP_REQUEST_NOT_FOUND',
  requestFinished: 'CP_REQUEST_FINISHED',
  noResult: 'CP_NO_RESULT',
  cancelForbidden: 'CP_CANCEL_FORBIDDEN',
  requestNotQueued: 'CP_REQUEST_NOT_QUEUED',
  attemptMismatch: 'CP_ATTEMPT_MISMATCH',
  deploymentNotFound: 'CP_DEPLOYMENT_NOT_FOUND',
  deploymentNotLive: 'CP_DEPLOYMENT_NOT_LIVE',
  invalidSettings: 'CP_INVALID_SETTINGS',
  autoscaleMax: 'CP_AUTOSCALE_AT_MAX',
  autoscaleBackoff: 'CP_AUTOSCALE_BACKOFF',
  replicaNotFound: 'CP_REPLICA_NOT_FOUND',
  replicaWrongState: 'CP_REPLICA_WRONG_STATE',
  replicaProtected: 'CP_REPLICA_PROTECTED',
  agentNotFound: 'CP_AGENT_NOT_FOUND',
  agentBootMismatch: 'CP_AGENT_BOOT_MISMATCH',
  agentLost: 'CP_AGENT_LOST',
  agentWrongState: 'CP_AGENT_WRONG_STATE',
  modelNotFound: 'CP_MODEL_NOT_FOUND',
  modelConflict: 'CP_MODEL_CONFLICT',
  modelDeployed: 'CP_MODEL_DEPLOYED',
  editNotFound: 'CP_EDIT_NOT_FOUND',
  editConflict: 'CP_EDIT_CONFLICT',
  editForbidden: 'CP_EDIT_FORBIDDEN',
  editLimit: 'CP_EDIT_LIMIT',
  leaderEpochStale: 'CP_LEADER_EPOCH_STALE',
} as const;

export type DomainErrorCodeName = (typeof DomainErrorCode)[keyof typeof DomainErrorCode];

const STATUS: Record<DomainErrorCodeName, number> = {
  CP_INVALID_COMMAND: 400,
  CP_REQUEST_EXISTS: 409,
  CP_REQUEST_NOT_FOUND: 404,
  CP_REQUEST_FINISHED: 409,
  CP_NO_RESULT: 409,
  CP_CANCEL_FORBIDDEN: 403,
  CP_REQUEST_NOT_QUEUED: 409,
  CP_ATTEMPT_MISMATCH: 409,
  CP_DEPLOYMENT_NOT_FOUND: 404,
  CP_DEPLOYMENT_NOT_LIVE: 409,
  CP_INVALID_SETTINGS: 400,
  CP_AUTOSCALE_AT_MAX: 409,
  CP_AUTOSCALE_BACKOFF: 409,
  CP_REPLICA_NOT_FOUND: 404,
  CP_REPLICA_WRONG_STATE: 409,
  CP_REPLICA_PROTECTED: 409,
  CP_AGENT_NOT_FOUND: 404,
  CP_AGENT_BOOT_MISMATCH: 409,
  CP_AGENT_LOST: 409,
  CP_AGENT_WRONG_STATE: 409,
  CP_MODEL_NOT_FOUND: 404,
  CP_MODEL_CONFLICT: 409,
  CP_MODEL_DEPLOYED: 409,
  CP_EDIT_NOT_FOUND: 404,
  CP_EDIT_CONFLICT: 409,
  CP_EDIT_FORBIDDEN: 403,
  CP_EDIT_LIMIT: 409,
  CP_LEADER_EPOCH_STALE: 409,
};

export class DomainError extends FabricError {
  constructor(code: DomainErrorCodeName, message: string, hint?: string, details?: Record<string, unknown>) {
    super(code, STATUS[code], message, { hint, details });
    this.name = 'DomainError';
  }
}

export function refuse(
  code: DomainErrorCodeName,
  message: string,
  hint?: string,
  details?: Record<string, unknown>,
): never {
  throw new DomainError(code, message, hint, details);
}

export function isDomainError(e: unknown): e is DomainError {
  return e instanceof DomainError;
}
