// Errors of the sandbox itself (docs/errors.md, "Sandbox"). A block's own failures cross the boundary as
// EXCEPTION messages (protocol/interleave.ts BlockError); these are failures to provide a runner at all.
import { FabricError } from '../protocol/errors.js';

export type SandboxErrorCode =
  | 'SANDBOX_CONFIG_INVALID'
  | 'SANDBOX_UNKNOWN_MODEL'
  | 'SANDBOX_RUNNER_START_FAILED'
  | 'SANDBOX_RUNNER_START_TIMEOUT'
  | 'SANDBOX_RUNNER_REFUSED'
  | 'SANDBOX_CLOSED'
  | 'SANDBOX_TIMEOUT'
  | 'SANDBOX_CANCELLED';

const STATUS: Record<SandboxErrorCode, number> = {
  SANDBOX_CONFIG_INVALID: 500,
  SANDBOX_UNKNOWN_MODEL: 404,
  SANDBOX_RUNNER_START_FAILED: 503,
  SANDBOX_RUNNER_START_TIMEOUT: 503,
  SANDBOX_RUNNER_REFUSED: 500,
  SANDBOX_CLOSED: 503,
  SANDBOX_TIMEOUT: 504,
  SANDBOX_CANCELLED: 499,
};

export class SandboxError extends FabricError {
  constructor(
    code: SandboxErrorCode,
    message: string,
    opts: { hint?: string; details?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(code, STATUS[code], message, opts);
    this.name = 'SandboxError';
  }
}
