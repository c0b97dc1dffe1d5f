// Public surface of the sandbox (docs/sandbox.md): what the agent uses to run untrusted blocks.
export { Sandbox, modelAssets } from './sandbox.js';
export type { ModelSource, RunUntrustedOptions, SandboxOptions } from './sandbox.js';
export type { SandboxSession, SessionReport } from './session.js';
export type { ModelAssets, RunnerEntry } from './launcher.js';
export type { Isolation } from './isolation.js';
export type { PoolStats } from './pool.js';
export { sandboxConfigFromEnv } from './config.js';
export type { RunnerLimits, SandboxConfig } from './config.js';
export { SandboxError } from './errors.js';
export type { SandboxErrorCode } from './errors.js';
