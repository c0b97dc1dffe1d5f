// The one seam over onnxruntime-node: every session of a model is created here with the same options, because
// results are bit-identical across sessions only at the same optimisation level, provider and thread count.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import ort from 'onnxruntime-node';

export type OptimizationLevel = 'disabled' | 'basic' | 'extended' | 'all';
export type ExecutionProvider = 'cpu' | 'cuda';

export interface SessionSettings {
  /** Default 'basic': no fusions across module boundaries, so segment runs equal the whole-graph run bit for bit. */
  level: OptimizationLevel;
  /** Default 1: as fast or faster on small CPU hosts, and deterministic. */
  intraOpThreads: number;
  provider: ExecutionProvider;
  /** Folder external-data locations resolve against. */
  weightsFolder: string;
  /** MatMul/Gemm weight pre-packing: faster runs, but a packed copy of the weights per session. */
  prepack: boolean;
}

export type OrtSession = ort.InferenceSession;
export type OrtTensor = ort.Tensor;
export const OrtTensorCtor = ort.Tensor;

/** CUDA is used only where its provider library was installed next to the binding; never required. */
export function cudaAvailable(): boolean {
  try {
    const req = createRequire(import.meta.url);
    const bindingDir = join(
      dirname(req.resolve('onnxruntime-node')),
      '..',
      'bin',
      'napi-v6',
      process.platform,
      process.arch,
    );
    return existsSync(join(bindingDir, 'libonnxruntime_providers_cuda.so'));
  } catch {
    return false;
  }
}

export async function createSession(model: Uint8Array, s: SessionSettings): Promise<OrtSession> {
  const session: Record<string, string> = { model_external_initializers_file_folder_path: s.weightsFolder };
  if (!s.prepack) session.disable_prepacking = '1';
  return ort.InferenceSession.create(model, {
    executionProviders: [s.provider],
    graphOptimizationLevel: s.level,
    intraOpNumThreads: s.intraOpThreads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: 3,
    extra: { session },
  });
}
