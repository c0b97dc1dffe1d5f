// Gradients on the bundled tiny GPT-2 (catalog/bundled/): against PyTorch autograd on the same weights
// (tests/fixtures/bundled-gradients/gpt2-tiny.*, scripts/reference/record_bundled_gradients.py); what a backward
// means next to the forward's interventions (a swapped value is a constant; a gradient swapped ahead applies when the
// backward reaches it; each invoke differentiates its own loss; a generation step's backward equals a single forward
// of the same tokens); and every refusal with its code: a gradient read before any backward or out of reverse order,
// a point without gradients, an op without a derivative rule (named with its module, before anything runs), a
// backward the request did not record for, a loss from an earlier step, a forgotten await.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InterventionError, loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import { encodeModel } from '../../gpu-agent/runtime/onnx/codec.js';
import { TensorDataType } from '../../gpu-agent/runtime/onnx/types.js';
import { GraphBuilder, floatTensor, tensorInfo } from '../../catalog/bundled/onnx-builder.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbsDiff, repoRoot, run, sameBits, tinyModel, value } from './tiny-model.js';
import { readSafetensors } from './hf-fixtures.js';

const FIXTURE = join(repoRoot, 'tests', 'fixtures', 'bundled-gradients', 'gpt2-tiny');
const ref = JSON.parse(readFileSync(`${FIXTURE}.json`, 'utf8')) as {
  ids: number[];
  text: string;
  metric: { value: number };
  gradients: Record<string, string>;
};
const want = readSafetensors(`${FIXTURE}.safetensors`);
const LOSS = 'const l = (await m.output).slice(0, -1); const loss = l.slice(7).sub(l.slice(11));';
const A = [464, 2068, 7586, 21831, 18045, 625, 262];
const B = [40, 1842, 3290];

after(async () => (await tinyModel()).close());

function rejectsWith(type: string, pattern: RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof InterventionError, `an InterventionError, got ${String(e)}`);
    assert.equal(e.blockError.type, type, e.message);
    assert.match(e.message, pattern);
    return true;
  };
}

test('gpt2-tiny: gradients at five module outputs match PyTorch autograd on the same weights', async () => {
  const hm = await tinyModel();
  const block = `async (m, ctx) => {
    await m.transformer.wte.output; await m.transformer.h[0].mlp.output; await m.transformer.h[0].output;
    await m.transformer.h[1].attn.output; await m.transformer.h[1].output;
    ${LOSS}
    ctx.backward(loss);
    const g = {};
    g['transformer.h.1.output'] = await m.transformer.h[1].output.grad;
    g['transformer.h.1.attn.output'] = await m.transformer.h[1].attn.output.grad;
    g['transformer.h.0.output'] = await m.transformer.h[0].output.grad;
    g['transformer.h.0.mlp.output'] = await m.transformer.h[0].mlp.output.grad;
    g['transformer.wte.output'] = await m.transformer.wte.output.grad;
    return { loss, g };
  }`;
  const r = await run(hm, { invokes: [{ prompt: ref.text, block }] });
  assert.deepEqual(r.invokes[0]!.tokens, ref.ids);
  const out = value(r.invokes[0]!.result) as { loss: Tensor; g: Record<string, Tensor> };
  assert.ok(Math.abs(out.loss.item() - ref.metric.value) < 1e-5);
  for (const [key, name] of Object.entries(ref.gradients)) {
    const d = maxAbsDiff(out.g[key]!, want.get(name)!);
    assert.ok(d <= 1e-5, `${key}: max |fabric − PyTorch| ${d}`);
  }
});

test("a generation step's backward equals the same tokens run as one forward pass, bit for bit", async () => {
  const hm = await tinyModel();
  const grads = (step: number) => `async (m, ctx) => {
    const s = m.step(${step});
    const h = await s.transformer.h[0].output;
    const l = (await s.output).slice(0, -1);
    ctx.backward(l.slice(7).sub(l.slice(11)));
    return { h1: await s.transformer.h[1].output.grad, h0: await s.transformer.h[0].output.grad, cached: ctx.cached, sequence: h.shape[1] };
  }`;
  const generated = await run(hm, { invokes: [{ tokens: B, block: grads(1) }], newTokens: 2 });
  // The request runs without the KV cache, and everything says so: the result, ctx.cached, step 1's whole sequence.
  assert.equal(generated.cache, 'none');
  assert.deepEqual(
    [
      (value(generated.invokes[0]!.result) as { cached: boolean }).cached,
      (value(generated.invokes[0]!.result) as { sequence: number }).sequence,
    ],
    [false, B.length + 1],
  );
  const tokens = [...B, generated.invokes[0]!.generated[0]!];
  const single = await run(hm, { invokes: [{ tokens, block: grads(0) }] });
  const a = value(generated.invokes[0]!.result) as Record<string, Tensor>;
  const b = value(single.invokes[0]!.result) as Record<string, Tensor>;
  for (const k of ['h1', 'h0']) assert.ok(sameBits(a[k]!, b[k]!), `${k}: step 1 of generation vs one forward`);
});

test('each invoke differentiates its own loss: its gradients equal the invoke run alone', async () => {
  const hm = await tinyModel();
  const block = (a: number, b: number) => `async (m, ctx) => {
    const l = (await m.output).slice(0, -1);
    l.slice(${a}).sub(l.slice(${b})).backward();
    return await m.transformer.h[0].output.grad;
  }`;
  const both = await run(hm, {
    invokes: [
      { tokens: A, block: block(7, 11) },
      { tokens: B, block: block(3, 5) },
    ],
  });
  const alone = [
    await run(hm, { invokes: [{ tokens: A, block: block(7, 11) }] }),
    await run(hm, { invokes: [{ tokens: B, block: block(3, 5) }] }),
  ];
  for (let i = 0; i < 2; i++) {
    const got = value(both.invokes[i]!.result) as Tensor;
    const solo = value(alone[i]!.invokes[0]!.result) as Tensor;
    const rows = got.slice(null, [got.shape[1]! - solo.shape[1]!, null]);
    assert.ok(maxAbsDiff(rows, solo) <= 1e-6, `invoke ${i}: batched vs alone ${maxAbsDiff(rows, solo)}`);
  }
});

test('a swapped value is a constant for the backward; a gradient swapped ahead applies when the backward reaches it', async () => {
  const hm = await tinyModel();
  const base = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => { await m.transformer.h[0].output; ${LOSS} ctx.backward(loss); return { h0: await m.transformer.h[0].output.grad, wte: await m.transformer.wte.output.grad }; }`,
      },
    ],
  });
  const swapped = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
    const h = await m.transformer.h[0].output;
    m.transformer.h[0].output = h.mul(1);
    ${LOSS}
    ctx.backward(loss);
    return { h0: await m.transformer.h[0].output.grad, wte: await m.transformer.wte.output.grad };
  }`,
      },
    ],
  });
  const b = value(base.invokes[0]!.result) as Record<string, Tensor>;
  const s = value(swapped.invokes[0]!.result) as Record<string, Tensor>;
  assert.ok(sameBits(b.h0!, s.h0!), 'the gradient at the swapped point is the same (the forward values are)');
  assert.ok(b.wte!.abs().max().item() > 0, 'without the swap the embedding has a gradient');
  assert.equal(s.wte!.abs().max().item(), 0, 'through the swapped (constant) value nothing reaches the embedding');
  const ahead = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
    ${LOSS}
    ctx.backward(loss);
    const h1 = await m.transformer.h[1].output.grad;
    m.transformer.h[0].output.grad = h1.zerosLike();
    return { h0: await m.transformer.h[0].output.grad, wte: await m.transformer.wte.output.grad };
  }`,
      },
    ],
  });
  const z = value(ahead.invokes[0]!.result) as Record<string, Tensor>;
  assert.equal(z.h0!.abs().max().item(), 0, 'the swapped-in zeros are what the block reads');
  assert.equal(z.wte!.abs().max().item(), 0, 'and what flows further down');
});

test('refused: a gradient before any backward, out of reverse order, of token ids, or with the wrong shape', async () => {
  const hm = await tinyModel();
  const invoke = (block: string) => run(hm, { invokes: [{ tokens: A, block }] });
  await assert.rejects(
    invoke(
      `async (m, ctx) => { await m.output; const g = await m.transformer.h[0].output.grad; if (false) ctx.backward(g); }`,
    ),
    rejectsWith('NoBackward', /call ctx\.backward\(loss\)/),
  );
  await assert.rejects(
    invoke(
      `async (m, ctx) => { ${LOSS} ctx.backward(loss); await m.transformer.h[0].output.grad; await m.transformer.h[1].output.grad; }`,
    ),
    rejectsWith(
      'OutOfOrder',
      /transformer\.h\.1\.output\.0\.grad was requested after transformer\.h\.0\.output\.0\.grad; gradients come in reverse forward order/,
    ),
  );
  await assert.rejects(
    invoke(`async (m, ctx) => { ${LOSS} ctx.backward(loss); await m.input.grad; }`),
    rejectsWith('NotDifferentiable', /token ids/),
  );
  await assert.rejects(
    invoke(
      `async (m, ctx) => { ${LOSS} ctx.backward(loss); const g = await m.transformer.h[1].output.grad; m.transformer.h[1].output.grad = g.slice(0); }`,
    ),
    rejectsWith('ShapeMismatch', /swap of transformer\.h\.1\.output\.0\.grad: expected shape \[1, 7, 64\]/),
  );
  await assert.rejects(
    invoke(`async (m, ctx) => { const l = await m.output; ctx.backward(l); }`),
    rejectsWith('BackwardError', /one element/),
  );
});

test('refused: a backward the request did not record for, a loss from an earlier step, a forgotten await', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, { invokes: [{ tokens: A, block: `async (m, ctx) => { ${LOSS} ctx['back' + 'ward'](loss); }` }] }),
    rejectsWith('BackwardError', /never names `backward`/),
  );
  await assert.rejects(
    run(hm, {
      newTokens: 2,
      invokes: [
        {
          tokens: B,
          block: `async (m, ctx) => {
    const l = (await m.output).slice(0, -1); const loss = l.slice(7).sub(l.slice(11));
    await m.step(1).transformer.h[0].output;
    ctx.backward(loss);
    await m.transformer.h[0].output.grad;
  }`,
        },
      ],
    }),
    rejectsWith('BackwardError', /computed from values of step 0, but the forward pass is at step 1/),
  );
  await assert.rejects(
    run(hm, {
      invokes: [
        {
          tokens: A,
          block: `async (m, ctx) => {
    ${LOSS} ctx.backward(loss);
    m.transformer.h[1].output.grad;
  }`,
        },
      ],
    }),
    (e: unknown) =>
      e instanceof InterventionError &&
      e.blockError.type === 'UnawaitedRead' &&
      /transformer\.h\.1\.output\.0\.grad/.test(e.message) &&
      /block-0\.js:3/.test(e.blockError.stack ?? ''),
  );
});

test('an op without a derivative rule is refused naming the op and its module, before any gradient segment runs', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-grad-elu-'));
  try {
    const g = new GraphBuilder();
    const emb = g.initializer(
      'emb.weight',
      floatTensor(
        Array.from({ length: 256 }, (_, i) => Math.sin(i)),
        [64, 4],
      ),
    );
    const w = g.initializer(
      'block.weight',
      floatTensor(
        Array.from({ length: 256 }, (_, i) => Math.cos(i)),
        [4, 64],
      ),
    );
    const e = g.one('/emb', 'Gather', [emb, 'input_ids']);
    const a = g.one('/block', 'Elu', [e]);
    const k = g.nodes.length;
    g.one('/block', 'MatMul', [a, w]);
    g.nodes[k]!.output = ['logits'];
    const model = {
      ir_version: 8,
      opset_import: [{ domain: '', version: 17 }],
      graph: {
        name: 'elu',
        node: g.nodes,
        initializer: g.initializers,
        input: [tensorInfo('input_ids', TensorDataType.INT64, ['batch', 'sequence'])],
        output: [tensorInfo('logits', TensorDataType.FLOAT, ['batch', 'sequence', 64])],
      },
    };
    writeFileSync(join(dir, 'model.onnx'), encodeModel(model));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ vocab_size: 64 }));
    const hm: HostedModel = await loadModel(dir, { key: 'elu' });
    try {
      const r = run(hm, {
        invokes: [
          {
            tokens: [1, 2, 3],
            block: `async (m, ctx) => {
        await m.emb.output;
        const l = (await m.output).slice(0, -1);
        ctx.backward(l.slice(3).sub(l.slice(5)));
        const top = await m.block.output.grad;
        try { await m.emb.output.grad; } catch (e) { return { top, refused: e.message, type: e.name }; }
      }`,
          },
        ],
      });
      const out = value((await r).invokes[0]!.result) as { top: Tensor; refused: string; type: string };
      assert.equal(out.type, 'NotDifferentiable');
      assert.match(
        out.refused,
        /emb\.output\.0\.grad: the backward from the loss down to it passes node \/block\/Elu \(Elu\) in module block: op Elu has no derivative rule/,
      );
      assert.equal(out.top.shape.join(), '1,3,64', 'the point above the op still has its gradient');
    } finally {
      await hm.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the example of docs/interleaving.md ("Gradients") runs: saliency per position, and the swap halves what flows down', async () => {
  const hm = await tinyModel();
  const doc = readFileSync(join(repoRoot, 'docs', 'interleaving.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Gradients'));
  const block = /```js\n([\s\S]*?)```/.exec(section)![1]!;
  const r = await run(hm, { invokes: [{ tokens: A, block }] });
  const out = value(r.invokes[0]!.result) as { saliency: Tensor; g0: Tensor };
  assert.deepEqual([...out.saliency.shape], [1, A.length]);
  const plain = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => { ${LOSS} ctx.backward(loss); await m.transformer.h[1].output.grad; return await m.transformer.h[0].output.grad; }`,
      },
    ],
  });
  const g0 = value(plain.invokes[0]!.result) as Tensor;
  assert.ok(g0.abs().max().item() > 0);
  assert.ok(maxAbsDiff(out.g0, g0.mul(0.5)) <= 1e-7, 'halving the gradient at h[1] halves the gradient at h[0]');
});

test("an input swapped for one module only (an alias): its gradient there plus the residual's gives the unswapped gradient", async () => {
  const hm = await tinyModel();
  const grads = (swap: boolean) => `async (m, ctx) => {
    const x = await m.transformer.h[1].ln_1.input;
    ${swap ? 'm.transformer.h[1].ln_1.input = x.mul(1);' : ''}
    ${LOSS}
    ctx.backward(loss);
    return { ln1: await m.transformer.h[1].ln_1.input.grad, h0: await m.transformer.h[0].output.grad };
  }`;
  const plain = value((await run(hm, { invokes: [{ tokens: A, block: grads(false) }] })).invokes[0]!.result) as Record<
    string,
    Tensor
  >;
  const swapped = value((await run(hm, { invokes: [{ tokens: A, block: grads(true) }] })).invokes[0]!.result) as Record<
    string,
    Tensor
  >;
  assert.ok(sameBits(plain.ln1!, plain.h0!), 'unswapped, the tensor is one: the same gradient at both points');
  assert.ok(
    maxAbsDiff(swapped.h0!, plain.h0!) > 1e-4,
    "the swapped copy takes the ln_1 path out of the tensor's gradient",
  );
  assert.ok(
    maxAbsDiff(swapped.ln1!.add(swapped.h0!), plain.h0!) <= 1e-6,
    'ln_1 path (the alias) + the residual = the whole',
  );
});
