// int8 and int4 replicas of the snapshot fixtures (weights quantized at load: hf/quantize.ts): the same module
// tree and forward order as the float32 replica; the reference prompts' logits within the documented tolerance of
// PyTorch's float32 logits (relative to their scale: int8 2e-2, int4 1.5e-1, docs/runtime.md "Quantized
// replicas"); reads, swaps and greedy generation with the KV cache work; a backward is refused with a coded error
// naming the quantized product; placement's size (snapshotWeightsBytes) is the bytes the replica holds.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadModel, InterventionError } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { QuantDtype } from '../../gpu-agent/runtime/hf/quantize.js';
import { snapshotWeightsBytes } from '../../gpu-agent/runtime/hf/snapshot-files.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbsDiff, run, sameBits, tensor } from './tiny-model.js';
import { hfDir, readReference, readSafetensors } from './hf-fixtures.js';

const TOLERANCE: Record<QuantDtype, number> = { int8: 2e-2, int4: 1.5e-1 };
const models: HostedModel[] = [];
after(async () => {
  for (const m of models) await m.close();
});

async function load(family: string, quantize?: QuantDtype): Promise<HostedModel> {
  const hm = await loadModel(join(hfDir, family, 'snapshot'), {
    key: `${family}-${quantize ?? 'fp32'}`,
    ...(quantize ? { quantize } : {}),
  });
  models.push(hm);
  return hm;
}

const scaleOf = (t: Tensor) => Math.max(...Array.from(t.data as Float32Array, Math.abs));

for (const family of ['gpt2', 'llama']) {
  for (const dtype of ['int8', 'int4'] as const) {
    test(`${family}/snapshot ${dtype}: same module tree; logits within ${TOLERANCE[dtype]} of PyTorch relative to scale; weights as placed`, async () => {
      const [fp, hm] = [await load(family), await load(family, dtype)];
      const dir = join(hfDir, family, 'snapshot');
      assert.deepEqual(
        hm.manifest().order,
        fp.manifest().order,
        'the forward order (and so the module tree) is the float one',
      );
      assert.equal(hm.weightsBytes, snapshotWeightsBytes(dir, dtype), 'placement sizes the replica from these bytes');
      // Linear layers (and a tied embedding) shrink to ~28 % (int8: a byte and a 4-byte scale per 32) or ~16 % (int4);
      // an untied embedding (Llama's embed_tokens) stays float.
      assert.ok(
        hm.weightsBytes < fp.weightsBytes * (dtype === 'int8' ? 0.5 : 0.4),
        `${hm.weightsBytes} vs ${fp.weightsBytes}`,
      );
      const ref = readReference(join(hfDir, family));
      const recorded = readSafetensors(join(hfDir, family, 'reference.safetensors'));
      for (const [i, p] of ref.prompts.entries()) {
        const r = await run(hm, { invokes: [{ prompt: p.text, block: 'async (m) => await m.output' }] });
        const got = tensor(r.invokes[0]!.result);
        const want = recorded.get(ref.cases[0]!.tensors[i]!.logits!)!;
        const rel = maxAbsDiff(got, want) / scaleOf(want);
        console.log(`${family} ${dtype} prompt ${i}: max |logit − PyTorch| / scale = ${rel.toExponential(2)}`);
        assert.ok(rel <= TOLERANCE[dtype], `${family} ${dtype} prompt ${i}: ${rel} > ${TOLERANCE[dtype]}`);
      }
    });

    test(`${family}/snapshot ${dtype}: reads, swaps and cached greedy generation work; a backward is refused, coded`, async () => {
      const hm = await load(family, dtype);
      const layer = family === 'gpt2' ? 'm.transformer.h[0]' : 'm.model.layers[0]';
      const prompt = readReference(join(hfDir, family)).prompts[0]!.text;
      const plain = await run(hm, {
        invokes: [{ prompt, block: `async (m) => { await ${layer}.output; return await m.output; }` }],
      });
      const swapped = await run(hm, {
        invokes: [
          {
            prompt,
            block: `async (m) => { const v = await ${layer}.mlp.output; ${layer}.mlp.output = v.zerosLike(); return await m.output; }`,
          },
        ],
      });
      assert.ok(
        maxAbsDiff(tensor(plain.invokes[0]!.result), tensor(swapped.invokes[0]!.result)) > 1e-3,
        'the swap changes the logits',
      );
      assert.equal(hm.manifest().generation?.cache, 'carried', 'generation carries the KV cache');
      const gen = await run(hm, { invokes: [{ prompt }], generation: { maxNewTokens: 4 } });
      const uncached = await run(hm, { invokes: [{ prompt }], generation: { maxNewTokens: 4, cache: false } });
      assert.equal(gen.invokes[0]!.generated.length, 4);
      assert.deepEqual(
        gen.invokes[0]!.generated,
        uncached.invokes[0]!.generated,
        'cached and uncached greedy tokens agree',
      );
      await assert.rejects(
        run(hm, {
          invokes: [
            {
              prompt,
              block: `async (m, ctx) => { const h = await ${layer}.output; const o = await m.output; const loss = o.slice(0, -1, 3).sub(o.slice(0, -1, 5)); ctx.backward(loss); return await ${layer}.output.grad; }`,
            },
          ],
        }),
        (e: unknown) => {
          assert.ok(e instanceof InterventionError, String(e));
          assert.equal(e.code, 'BLOCK_NOT_DIFFERENTIABLE', e.message);
          assert.match(e.message, /MatMulNBits/);
          assert.match(e.message, /quantized/);
          return true;
        },
      );
    });
  }
}

// A quantized product takes no other kernel path for a row alone: each row's logits are bit-identical whether it
// runs alone or beside another (one token each, where the batch has the fewest rows, and whole prompts).
for (const family of ['gpt2', 'llama']) {
  for (const dtype of ['int8', 'int4'] as const) {
    test(`${family}/snapshot ${dtype}: a row's logits are the same bits alone and in a batch`, async () => {
      const hm = await load(family, dtype);
      const block = 'async (m) => await m.output';
      for (const [a, b] of [
        [[7], [11]],
        [
          [7, 3, 9],
          [11, 2, 5],
        ],
      ] as const) {
        const alone = await run(hm, { invokes: [{ tokens: [...a], block }] });
        const both = await run(hm, {
          invokes: [
            { tokens: [...a], block },
            { tokens: [...b], block },
          ],
        });
        const x = tensor(alone.invokes[0]!.result);
        const y = tensor(both.invokes[0]!.result);
        assert.ok(maxAbsDiff(x, y) === 0 && sameBits(x, y), `${a.length} token(s): ${maxAbsDiff(x, y)}`);
      }
    });
  }
}
