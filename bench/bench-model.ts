// The benchmarks' model, generated on first use and cached: its folder, whether it was already cached, and how long
// generating it took (0 when cached), so a bench can report that time apart from what it measures.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { bundledModelDir, ensureModel, type BundledModelName } from '../catalog/bundled/generate-model.js';

export function ensureBenchModel(name: BundledModelName): { dir: string; cached: boolean; generateS: number } {
  const cached = existsSync(join(bundledModelDir(name), 'model.onnx'));
  const t = performance.now();
  const dir = ensureModel(name);
  return { dir, cached, generateS: cached ? 0 : (performance.now() - t) / 1000 };
}
