// What a model's graph takes and gives, checked at load: inputs the runtime can feed (and dims it can vary), the
// output that carries next-token logits (none for an encoder), and the padding side that keeps a batch row equal
// to the same prompt run alone.
//
// Padding is checked, not assumed: exports differ in how they number positions and mask padding (a graph fed
// position_ids follows the mask; GPT-2 exported without attention_mask cannot mask anything). The load runs one
// short prompt alone and in a batch beside a longer one, padded on the model's side (left with a language-model
// head, right without), and keeps that side only if the row matches the lone run; a model that fails serves
// batches of equal-length rows only.
import type { ModelGraph } from '../graph/model-graph.js';
import type { TensorFacts } from './probe.js';
import type { OrtTensor } from '../ort/session.js';
import { ModelLoadError } from '../errors.js';
import { SUPPORTED_INPUTS, unfeedable } from '../graph/model-inputs.js';
import type { PaddedBatch, PaddingSide } from '../graph/model-inputs.js';
import { padRows } from '../graph/model-inputs.js';
import { floatValues } from '../../../protocol/tensor-payload.js';

/** Refuses inputs the runtime cannot feed and token inputs with fixed batch or sequence dims. */
export function checkInputs(graph: ModelGraph): void {
  const bad = graph.graphInputs.map((v) => [v.name, unfeedable(v)] as const).filter(([, why]) => why !== undefined);
  if (bad.length > 0) {
    throw new ModelLoadError(
      'MODEL_INPUT_UNSUPPORTED',
      `the model's inputs cannot be fed: ${bad.map(([, why]) => why).join('; ')}. The runtime feeds ${SUPPORTED_INPUTS.join(', ')}`,
      {
        details: { inputs: bad.map(([n]) => n) },
      },
    );
  }
  const ids = graph.graphInputs.find((v) => v.name === 'input_ids');
  if (!ids)
    throw new ModelLoadError(
      'MODEL_INPUT_UNSUPPORTED',
      'the model has no input_ids input; the runtime feeds token ids as input_ids',
    );
  for (const v of graph.graphInputs) {
    if (!['input_ids', 'attention_mask', 'position_ids', 'token_type_ids'].includes(v.name)) continue;
    const dims = v.type?.tensor_type?.shape?.dim ?? [];
    const fixed = dims
      .slice(0, 2)
      .map((d, i) =>
        typeof d.dim_value === 'number' && d.dim_value > 0 ? `${i === 0 ? 'batch' : 'sequence'} ${d.dim_value}` : null,
      )
      .filter((x) => x !== null);
    if (fixed.length > 0) {
      throw new ModelLoadError(
        'MODEL_STATIC_DIMS',
        `input ${v.name} has a fixed ${fixed.join(' and ')}: the export fixed them from its example input. Export with a batch >= 2 example and dynamic_shapes (torch.onnx.export(..., dynamo=True, dynamic_shapes=...)) or dynamic_axes (TorchScript exporter) for batch and sequence`,
        { details: { input: v.name, fixed } },
      );
    }
  }
}

/** The graph output with next-token logits: `logits`, else a rank-3 output whose last dim is the vocabulary. */
export function findLmHead(graph: ModelGraph, facts: Map<string, TensorFacts>, vocabSize: number): string | null {
  const named = graph.graphOutputs.find((v) => v.name === 'logits');
  if (named) return named.name;
  for (const v of graph.graphOutputs) {
    const dims = facts.get(v.name)?.dims;
    const last = dims?.[dims.length - 1];
    if (
      dims?.length === 3 &&
      last &&
      last.b === 0 &&
      last.t === 0 &&
      last.bt === 0 &&
      vocabSize > 0 &&
      last.k === vocabSize
    )
      return v.name;
  }
  return null;
}

/** Runs the whole graph on a padded batch and returns its first output. */
export type BatchRunner = (batch: PaddedBatch) => Promise<OrtTensor>;

function rowsMatch(alone: OrtTensor, batched: OrtTensor, b: PaddedBatch, row: number): boolean {
  // Compare the row's real positions; outputs without a sequence dim (a pooler) compare whole.
  const a = toFloat(alone);
  const x = toFloat(batched);
  const tolerance = alone.type === 'float16' ? 2e-2 : 1e-3;
  const perToken = alone.dims.length >= 3 ? alone.dims.slice(2).reduce((n, d) => n * d, 1) : 0;
  const len = b.lengths[row]!;
  let scale = 1;
  let worst = 0;
  if (perToken === 0) {
    const width = a.length;
    for (let i = 0; i < width; i++) {
      scale = Math.max(scale, Math.abs(Number(a[i])));
      worst = Math.max(worst, Math.abs(Number(a[i]) - Number(x[row * width + i])));
    }
  } else {
    const start = b.side === 'left' ? b.seq - len : 0;
    for (let p = 0; p < len; p++) {
      for (let k = 0; k < perToken; k++) {
        const va = Number(a[p * perToken + k]);
        const vx = Number(x[(row * b.seq + start + p) * perToken + k]);
        scale = Math.max(scale, Math.abs(va));
        worst = Math.max(worst, Math.abs(va - vx));
      }
    }
  }
  return Number.isFinite(worst) && worst <= tolerance * scale;
}

/**
 * `side` when a row padded on it equals its lone run, else 'none'. Models with a language-model head are padded
 * on the left, so position -1 is every row's next-token position (what `m.output[:, -1]` means); encoders on the
 * right, so position 0 is every row's first token ([CLS]). A wrong side is off by whole units (positions shifted,
 * padding attended), far above the tolerance: 1e-3 of the output's scale, 2e-2 for float16 outputs.
 */
export async function probePadding(
  run: BatchRunner,
  padId: number,
  vocabSize: number,
  side: 'left' | 'right',
): Promise<PaddingSide> {
  const v = Math.max(2, Math.min(vocabSize || 50, 50));
  const short = [1 % v, 3 % v, 5 % v];
  const long = [7 % v, 2 % v, 9 % v, 4 % v, 6 % v, 8 % v];
  const alone = await run(padRows([short], padId, side));
  const batch = padRows([long, short], padId, side);
  const both = await run(batch);
  return rowsMatch(alone, both, batch, 1) ? side : 'none';
}

function toFloat(t: OrtTensor): ArrayLike<number> {
  return t.type === 'float16' ? floatValues(t.data as Uint16Array, 'float16') : (t.data as Float32Array);
}
