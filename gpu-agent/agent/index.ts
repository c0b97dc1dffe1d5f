// The GPU agent process's parts; fabric/gpu-agent.ts composes them. See docs/agent.md.
export { GpuAgent, type GpuAgentOptions, type AgentHealth } from './agent.js';
export { agentConfigFromEnv, parseGpus, type AgentConfig, type ProviderChoice } from './config.js';
export { AgentErrorCode } from './errors.js';
export { ReplicaHost, type ReplicaView, type ReplicaPhase } from './replicas.js';
export { RequestExecutor, type UntrustedOpener } from './requests.js';
export { RESULT_CONTENT_TYPE } from './result-store.js';
export { Reporter, type Cause } from './reporter.js';
export { failureReport, type FailureReport } from './failure.js';
export { sandboxOpener } from './sandbox-opener.js';
export { parseBytes } from './sizes.js';
