// BertModel from a snapshot (encoder, pooler): word + token-type + position embeddings (positions 0…n−1; BERT pads
// on the right), LayerNorm; per layer self-attention (query/key/value, no causal mask), BertSelfOutput (dense,
// LayerNorm of it plus the input), intermediate (dense, exact GELU), BertOutput (dense, LayerNorm of it plus the
// attention's output); the pooler (dense on the first token, tanh). Inputs input_ids, attention_mask,
// token_type_ids; outputs last_hidden_state and pooler_output. Checkpoints of BertFor… heads store the encoder
// under `bert.`: their tensors are found under that prefix too.
import type { BertConfig } from './config.js';
import { scopeOf } from './graph-context.js';
import type { GraphContext } from './graph-context.js';
import { gelu } from './gpt2.js';

export function buildBertGraph(ctx: GraphContext, c: BertConfig): void {
  const g = ctx.g;
  const d = c.d;
  const hd = d / c.heads;
  const E = '/embeddings';
  const words = ctx.embedding('embeddings.word_embeddings', 'input_ids', c.vocab, d);
  const types = ctx.embedding('embeddings.token_type_embeddings', 'token_type_ids', c.typeVocab, d);
  const seqLen = g.one(E, 'Gather', [g.one(E, 'Shape', ['input_ids']), ctx.i64(E, [1], [])], { axis: 0 });
  const positionIds = g.one(E, 'Unsqueeze', [
    g.one(E, 'Range', [ctx.i64(E, [0], []), seqLen, ctx.i64(E, [1], [])]),
    ctx.i64(E, [0]),
  ]);
  const positions = ctx.embedding('embeddings.position_embeddings', positionIds, c.positions, d);
  const summed = g.one(E, 'Add', [g.one(E, 'Add', [words, types]), positions]);
  let hidden = ctx.layerNorm('embeddings.LayerNorm', summed, d, c.eps);
  const bias = ctx.attentionBias('/encoder', false);
  for (let i = 0; i < c.layers; i++) {
    const P = `encoder.layer.${i}`;
    const S = `${P}.attention.self`;
    const proj = (name: string) => ctx.linear(`${S}.${name}`, hidden, d, d, { stored: 'out_in', bias: true });
    const heads = (t: string) => ctx.splitHeads(scopeOf(S), t, c.heads, hd);
    const self = ctx.attend(scopeOf(S), heads(proj('query')), heads(proj('key')), heads(proj('value')), bias, hd, d);
    const O = `${P}.attention.output`;
    const dense = ctx.linear(`${O}.dense`, self, d, d, { stored: 'out_in', bias: true });
    const attnOut = ctx.layerNorm(`${O}.LayerNorm`, g.one(scopeOf(O), 'Add', [dense, hidden]), d, c.eps);
    const I = `${P}.intermediate`;
    const inter = gelu(
      ctx,
      `${scopeOf(I)}/intermediate_act_fn`,
      ctx.linear(`${I}.dense`, attnOut, d, c.intermediate, { stored: 'out_in', bias: true }),
      'gelu',
    );
    const Out = `${P}.output`;
    const dense2 = ctx.linear(`${Out}.dense`, inter, c.intermediate, d, { stored: 'out_in', bias: true });
    hidden = ctx.layerNorm(`${Out}.LayerNorm`, g.one(scopeOf(Out), 'Add', [dense2, attnOut]), d, c.eps);
  }
  hidden = ctx.nameLast('last_hidden_state');
  const Pl = '/pooler';
  const first = g.one(Pl, 'Gather', [hidden, ctx.i64(Pl, [0], [])], { axis: 1 });
  const pooled = ctx.linear('pooler.dense', first, d, d, { stored: 'out_in', bias: true });
  g.one(`${Pl}/activation`, 'Tanh', [pooled]);
  ctx.nameLast('pooler_output');
}
