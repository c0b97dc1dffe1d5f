// A BERT-family encoder (BertModel's structure) as an ONNX graph (opset 17) with the TorchScript exporter's scope
// names: word + position (arange) + token-type embeddings and LayerNorm, post-norm layers (attention.self,
// attention.output, intermediate with erf GELU, output), the pooler on the first token. Inputs input_ids,
// attention_mask, token_type_ids; outputs last_hidden_state, pooler_output. Seeded weights; for the families
// benchmark.
import { TensorDataType } from '../../gpu-agent/runtime/formats.js';
import { floatTensor, int64Tensor, tensorInfo } from '../../catalog/bundled/onnx-builder.js';
import type { Gpt2Graph } from '../../catalog/bundled/gpt2.js';
import { attentionBias, generatedModel, weightFactory } from './graph-parts.js';

export interface BertShape {
  layers: number;
  dModel: number;
  heads: number;
  intermediate: number;
  vocab: number;
  positions: number;
  seed: number;
}

export function buildBert(s: BertShape): Gpt2Graph {
  if (s.dModel % s.heads !== 0) throw new Error('d_model must divide by heads');
  const { g, weight, weights } = weightFactory(s.seed);
  const d = s.dModel;
  const hd = d / s.heads;
  const i64 = (scope: string, v: number[], dims?: number[]) => g.constant(scope, int64Tensor(v, dims));
  const f32 = (scope: string, v: number) => g.constant(scope, floatTensor([v], []));
  const linear = (scope: string, x: string, name: string, nIn: number, nOut: number): string =>
    g.one(scope, 'Add', [
      g.one(scope, 'MatMul', [x, weight(`${name}.weight`, [nIn, nOut], 0.02)]),
      weight(`${name}.bias`, [nOut], 0.02),
    ]);
  const layerNorm = (scope: string, x: string, name: string): string =>
    g.one(scope, 'LayerNormalization', [x, weight(`${name}.weight`, [d], 0.1, 1), weight(`${name}.bias`, [d], 0.02)], {
      axis: -1,
      epsilon: { float: 1e-12 },
    });

  const E = '/embeddings';
  const seqLen = g.one(E, 'Gather', [g.one(E, 'Shape', ['input_ids']), i64(E, [1], [])], { axis: 0 });
  const positions = g.one(E, 'Unsqueeze', [g.one(E, 'Range', [i64(E, [0], []), seqLen, i64(E, [1], [])]), i64(E, [0])]);
  const words = g.one(`${E}/word_embeddings`, 'Gather', [
    weight('embeddings.word_embeddings.weight', [s.vocab, d], 0.02),
    'input_ids',
  ]);
  const types = g.one(`${E}/token_type_embeddings`, 'Gather', [
    weight('embeddings.token_type_embeddings.weight', [2, d], 0.02),
    'token_type_ids',
  ]);
  const pos = g.one(`${E}/position_embeddings`, 'Gather', [
    weight('embeddings.position_embeddings.weight', [s.positions, d], 0.02),
    positions,
  ]);
  let hidden = layerNorm(
    `${E}/LayerNorm`,
    g.one(E, 'Add', [g.one(E, 'Add', [words, types]), pos]),
    'embeddings.LayerNorm',
  );

  const bias = attentionBias(g, '', false);
  for (let i = 0; i < s.layers; i++) {
    const L = `/encoder/layer.${i}`;
    const P = `encoder.layer.${i}`;
    const S = `${L}/attention/self`;
    const heads = (t: string) =>
      g.one(S, 'Transpose', [g.one(S, 'Reshape', [t, i64(S, [0, 0, s.heads, hd])])], { perm: [0, 2, 1, 3] });
    const q = heads(linear(`${S}/query`, hidden, `${P}.attention.self.query`, d, d));
    const k = heads(linear(`${S}/key`, hidden, `${P}.attention.self.key`, d, d));
    const v = heads(linear(`${S}/value`, hidden, `${P}.attention.self.value`, d, d));
    const scores = g.one(S, 'Div', [
      g.one(S, 'MatMul', [q, g.one(S, 'Transpose', [k], { perm: [0, 1, 3, 2] })]),
      f32(S, Math.sqrt(hd)),
    ]);
    const probs = g.one(S, 'Softmax', [g.one(S, 'Add', [scores, bias])], { axis: -1 });
    const ctx = g.one(S, 'Reshape', [
      g.one(S, 'Transpose', [g.one(S, 'MatMul', [probs, v])], { perm: [0, 2, 1, 3] }),
      i64(S, [0, 0, d]),
    ]);
    const O = `${L}/attention/output`;
    const attn = layerNorm(
      `${O}/LayerNorm`,
      g.one(O, 'Add', [linear(`${O}/dense`, ctx, `${P}.attention.output.dense`, d, d), hidden]),
      `${P}.attention.output.LayerNorm`,
    );
    const I = `${L}/intermediate`;
    const up = linear(`${I}/dense`, attn, `${P}.intermediate.dense`, d, s.intermediate);
    const A = `${I}/intermediate_act_fn`;
    const gelu = g.one(A, 'Mul', [
      g.one(A, 'Mul', [up, f32(A, 0.5)]),
      g.one(A, 'Add', [g.one(A, 'Erf', [g.one(A, 'Div', [up, f32(A, Math.SQRT2)])]), f32(A, 1)]),
    ]);
    const OU = `${L}/output`;
    hidden = layerNorm(
      `${OU}/LayerNorm`,
      g.one(OU, 'Add', [linear(`${OU}/dense`, gelu, `${P}.output.dense`, s.intermediate, d), attn]),
      `${P}.output.LayerNorm`,
    );
  }
  const last = g.nodes.length;
  g.one('/encoder', 'Identity', [hidden]);
  g.nodes[last]!.output = ['last_hidden_state'];
  const PO = '/pooler';
  const first = g.one(PO, 'Gather', ['last_hidden_state', i64(PO, [0], [])], { axis: 1 });
  const dense = linear(`${PO}/dense`, first, 'pooler.dense', d, d);
  const pooled = g.nodes.length;
  g.one(PO, 'Tanh', [dense]);
  g.nodes[pooled]!.output = ['pooler_output'];

  const model = generatedModel(
    'bert',
    g,
    weights,
    ['input_ids', 'attention_mask', 'token_type_ids'],
    [
      tensorInfo('last_hidden_state', TensorDataType.FLOAT, ['batch', 'sequence', d]),
      tensorInfo('pooler_output', TensorDataType.FLOAT, ['batch', d]),
    ],
  );
  return { model, weights };
}
