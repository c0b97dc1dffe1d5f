// Pieces the families benchmark's generated graphs share: seeded weights collected for the writer, the additive
// attention bias from the attention mask (float32 min where a key is masked; causal or not), the model wrapper.
import { TensorDataType } from '../../gpu-agent/runtime/formats.js';
import type { ModelProto, ValueInfoProto } from '../../gpu-agent/runtime/formats.js';
import { GraphBuilder, floatTensor, int64Tensor, tensorInfo } from '../../catalog/bundled/onnx-builder.js';
import type { Gpt2Weight } from '../../catalog/bundled/gpt2.js';
import { Sfc32, fillUniform } from '../../catalog/bundled/prng.js';

const FLOAT32_MIN = -3.4028234663852886e38;

export function weightFactory(seed: number) {
  const g = new GraphBuilder();
  const rng = new Sfc32(seed);
  const weights: Gpt2Weight[] = [];
  const weight = (name: string, dims: number[], std: number, mean = 0): string => {
    weights.push({ name, dims, data: fillUniform(rng, new Float32Array(dims.reduce((a, b) => a * b, 1)), std, mean) });
    return name;
  };
  return { g, weight, weights };
}

/** [batch, 1, sequence, sequence] float32 bias: 0 where the key is visible, float32 min where masked. */
export function attentionBias(g: GraphBuilder, scope: string, causal = true): string {
  const i64 = (v: number[], dims?: number[]) => g.constant(scope, int64Tensor(v, dims));
  const padBool = g.one(scope, 'Cast', ['attention_mask'], { to: TensorDataType.BOOL });
  let allowed = g.one(scope, 'Unsqueeze', [padBool, i64([1, 2])]);
  if (causal) {
    const seqLen = g.one(scope, 'Gather', [g.one(scope, 'Shape', ['input_ids']), i64([1], [])], { axis: 0 });
    const range = g.one(scope, 'Range', [i64([0], []), seqLen, i64([1], [])]);
    const causalMask = g.one(scope, 'LessOrEqual', [
      g.one(scope, 'Unsqueeze', [range, i64([0])]),
      g.one(scope, 'Unsqueeze', [range, i64([1])]),
    ]);
    allowed = g.one(scope, 'And', [causalMask, allowed]);
  }
  return g.one(scope, 'Where', [
    allowed,
    g.constant(scope, floatTensor([0], [])),
    g.constant(scope, floatTensor([FLOAT32_MIN], [])),
  ]);
}

/** The opset-17 model of a generated graph: int64 `[batch, sequence]` token inputs, the given outputs, weights listed without data (the writer attaches them). */
export function generatedModel(
  name: string,
  g: GraphBuilder,
  weights: Gpt2Weight[],
  inputs: string[],
  outputs: ValueInfoProto[],
): ModelProto {
  return {
    ir_version: 8,
    opset_import: [{ domain: '', version: 17 }],
    producer_name: 'ndif-fabric bench/families',
    producer_version: '1',
    graph: {
      name,
      node: g.nodes,
      initializer: weights.map((w) => ({ name: w.name, dims: w.dims, data_type: TensorDataType.FLOAT })),
      input: inputs.map((n) => tensorInfo(n, TensorDataType.INT64, ['batch', 'sequence'])),
      output: outputs,
    },
  };
}
