// Shared by the runtime tests: the bundled tiny model, loaded once per test file, and a helper that runs blocks
// in-process through the real host and block side.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel, RunRequest, RunResult } from '../../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import type { SavedTree } from '../../protocol/interleave.js';
import { materializeTree } from '../../protocol/result-container.js';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const fixtureDir = join(repoRoot, 'tests', 'fixtures', 'gpt2-reference');

let tiny: Promise<HostedModel> | undefined;

export function tinyModel(): Promise<HostedModel> {
  tiny ??= loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny' });
  return tiny;
}

export function inProcess(hm: HostedModel) {
  return () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
}

export function run(hm: HostedModel, req: RunRequest): Promise<RunResult> {
  return hm.run(req, inProcess(hm));
}

/** A saved result with tensors as Tensor objects. */
export function value(s: SavedTree): unknown {
  return materializeTree(s, (p) => Tensor.fromPayload(p));
}

export function tensor(s: SavedTree, i = 0): Tensor {
  return Tensor.fromPayload(s.tensors[i]!);
}

export function sameBits(a: Tensor, b: Tensor): boolean {
  if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join()) return false;
  // Compared as bytes (memcmp): a callback per byte took seconds over a test file's logits.
  const x = Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength);
  const y = Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength);
  return x.equals(y);
}

/** The largest absolute value of a tensor: the scale a difference is judged against. */
export function maxAbs(t: Tensor): number {
  let m = 0;
  for (let i = 0; i < t.size; i++) m = Math.max(m, Math.abs(t.flat(i)));
  return m;
}

export function maxAbsDiff(a: Tensor, b: Tensor): number {
  if (a.shape.join() !== b.shape.join()) return Infinity;
  let m = 0;
  for (let i = 0; i < a.size; i++) m = Math.max(m, Math.abs(a.flat(i) - b.flat(i)));
  return m;
}
