// The benchmarks' model, generated on first use and cached: its folder, whether it was already cached, and how long
// generating it took (0 when cached), so a bench can report that time apart from what it measures.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { bundledModelDir, ensureModel, type BundledModelName } from '../catalog/bundled/generate-model.js';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel } from '../gpu-agent/runtime/index.js';

export function ensureBenchModel(name: BundledModelName): { dir: string; cached: boolean; generateS: number } {
  const cached = existsSync(join(bundledModelDir(name), 'model.onnx'));
  const t = performance.now();
  const dir = ensureModel(name);
  return { dir, cached, generateS: cached ? 0 : (performance.now() - t) / 1000 };
}

/** The bench model generated if need be and loaded, with both times (reported on stderr, kept out of the ratios). */
export async function loadBenchModel(
  name: BundledModelName,
): Promise<{ hm: HostedModel; generateS: number; loadS: number }> {
  const { dir, cached, generateS } = ensureBenchModel(name);
  const t = performance.now();
  const hm = await loadModel(dir, { key: name });
  const loadS = (performance.now() - t) / 1000;
  process.stderr.write(
    `${name}: ${cached ? 'cached' : `generated in ${generateS.toFixed(1)} s`}, loaded in ${loadS.toFixed(1)} s\n`,
  );
  return { hm, generateS, loadS };
}
