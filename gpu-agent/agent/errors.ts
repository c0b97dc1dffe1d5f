// Errors of the GPU agent; codes are listed in docs/errors.md ("GPU agent, relay and catalog").
import { FabricError } from '../../protocol/errors.js';

export const AgentErrorCode = {
  ConfigInvalid: 'AGENT_CONFIG_INVALID',
  ReplicaNotLoaded: 'AGENT_REPLICA_NOT_LOADED',
  SandboxUnavailable: 'AGENT_SANDBOX_UNAVAILABLE',
  PayloadUnavailable: 'AGENT_PAYLOAD_UNAVAILABLE',
  ResultTooLarge: 'RESULT_TOO_LARGE',
  CudaUnavailable: 'AGENT_CUDA_UNAVAILABLE',
} as const;

export function agentConfigInvalid(variable: string, value: string, accepts: string): FabricError {
  return new FabricError(
    AgentErrorCode.ConfigInvalid,
    500,
    `${variable}=${JSON.stringify(value)} is not valid: ${accepts}`,
    {
      hint: `fix ${variable} or unset it for the default`,
      details: { variable, value },
    },
  );
}

/** NDIF_AGENT_EP=cuda on a host without onnxruntime-node's CUDA execution provider binaries. */
export function cudaUnavailable(): FabricError {
  return new FabricError(
    AgentErrorCode.CudaUnavailable,
    500,
    "NDIF_AGENT_EP=cuda, but onnxruntime-node's CUDA execution provider is not installed (no libonnxruntime_providers_cuda.so next to its binding in node_modules/onnxruntime-node/bin/napi-v6/<platform>/<arch>/); the agent does not start rather than run on the CPU unasked",
    {
      hint: 'on a GPU host with CUDA 12 and cuDNN 9, install the binaries with `ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js` (it downloads Microsoft.ML.OnnxRuntime.Gpu.Linux from nuget.org), or run with NDIF_AGENT_EP=cpu (docs/agent.md, "Execution provider")',
      details: { variable: 'NDIF_AGENT_EP', value: 'cuda' },
    },
  );
}
