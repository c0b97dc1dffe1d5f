// Greedy generation against PyTorch: the fixtures record, for prompt 0 of each causal family, the tokens and the
// per-step last-position logits of greedy decoding with transformers' KV cache. The runtime generates with its own
// KV cache (the export's past_key_values, or carried keys and values; hf-generation-cache.int.test.ts checks
// the uncached path and interventions too); tokens must be the same and every step's logits within the fixture's
// tolerance.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbsDiff, run, value } from './tiny-model.js';
import { readReference, readSafetensors, variants } from './hf-fixtures.js';

const models: HostedModel[] = [];
after(async () => Promise.all(models.map((m) => m.close())));

for (const v of variants()) {
  const ref = readReference(v.referenceDir);
  if (!ref.generate) continue;
  const gen = ref.generate;
  test(`${v.label}: greedy generation of ${gen.new_tokens} tokens matches PyTorch's (tokens and per-step logits)`, async () => {
    const hm = await loadModel(v.dir, { key: v.label });
    models.push(hm);
    const want = readSafetensors(join(v.referenceDir, 'reference.safetensors')).get(gen.logits)!;
    const block = `async (m) => { const out = []; for (let i = 0; i < ${gen.new_tokens}; i++) out.push((await m.step(i).output).slice(0, -1)); return out; }`;
    const r = await run(hm, { invokes: [{ prompt: ref.prompts[gen.prompt]!.text, block }], newTokens: gen.new_tokens });
    assert.deepEqual(r.invokes[0]!.generated, gen.tokens, `${v.label}: generated tokens`);
    const steps = value(r.invokes[0]!.result) as Tensor[];
    steps.forEach((got, i) => {
      const d = maxAbsDiff(got, want.slice(i));
      assert.ok(d <= ref.tolerance, `${v.label} step ${i}: max |runtime - PyTorch| = ${d}`);
    });
  });
}
