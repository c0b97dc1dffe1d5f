// Cached generation against PyTorch's generate with its KV cache, for every causal fixture variant (GPT-2:
// TorchScript, dynamo, optimum-style with-past; Llama: TorchScript, dynamo; Qwen2: dynamo). generation.json
// (scripts/reference/record_generation.py) holds, for prompt 0, greedy decoding plain and with a module's output
// zeroed by a forward hook during one forward pass only (step 0, the prompt; step 2, one new token): later steps
// then differ only through the keys and values the cache kept. With its cache (past or carried) the runtime's
// per-step logits must be within 1e-4 of PyTorch's and the tokens equal, and the swap must visibly change the later
// steps (far above the tolerance). Without the cache (generation.cache false) each step recomputes the whole
// sequence, so a swap changes its own step only (and there covers every position): plain generation and the steps
// before the swap still match.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbsDiff, run, value } from './tiny-model.js';
import { hfDir, moduleExpr, readReference, readSafetensors, variants } from './hf-fixtures.js';

interface GenerationCase {
  name: string;
  tokens: number[];
  logits: string;
  intervention: { path: string; point: 'output'; what: 'zeros'; step: number } | null;
}
interface GenerationFixture {
  format: string;
  tolerance: number;
  prompt: { text: string; ids: number[] };
  new_tokens: number;
  cases: GenerationCase[];
}

const models: HostedModel[] = [];
after(async () => Promise.all(models.map((m) => m.close())));

function blockFor(c: GenerationCase, steps: number): string {
  const lines = [
    'async (m) => {',
    '  const out = [];',
    `  for (let i = 0; i < ${steps}; i++) {`,
    '    const s = m.step(i);',
  ];
  const iv = c.intervention;
  if (iv)
    lines.push(
      `    if (i === ${iv.step}) { const v = await ${moduleExpr(iv.path).replace(/^m/, 's')}.output; ${moduleExpr(iv.path).replace(/^m/, 's')}.output = v.zerosLike(); }`,
    );
  lines.push('    out.push((await s.output).slice(0, -1));', '  }', '  return out;', '}');
  return lines.join('\n');
}

/** The causal families: each has its generation fixture (BERT does not generate). */
const GENERATING = new Set(['gpt2', 'llama', 'qwen2']);

for (const v of variants()) {
  const file = join(hfDir, v.family, 'generation.json');
  const ref = readReference(v.referenceDir);
  if (!GENERATING.has(v.family) || ref.dtype !== 'float32') continue;
  if (!existsSync(file)) {
    test(`${v.label}: has its generation fixture`, () => {
      assert.fail(`${file} is missing: record it with scripts/reference/record_generation.py`);
    });
    continue;
  }
  const fx = JSON.parse(readFileSync(file, 'utf8')) as GenerationFixture;
  const recorded = readSafetensors(join(hfDir, v.family, 'generation.safetensors'));
  test(`${v.label}: cached and uncached generation match PyTorch's generate with its cache, plain and with a swap at steps 0 and 2`, async () => {
    const hm = await loadModel(v.dir, { key: v.label });
    models.push(hm);
    const mode = hm.manifest().generation!.cache;
    assert.notEqual(
      mode,
      'none',
      `${v.label} generates with a KV cache (${hm.manifest().generation!.cacheReason ?? ''})`,
    );
    const plain = recorded.get(fx.cases[0]!.logits)!;
    let worst = 0;
    for (const c of fx.cases) {
      const want = recorded.get(c.logits)!;
      for (const cache of [true, false]) {
        const r = await run(hm, {
          invokes: [{ prompt: fx.prompt.text, block: blockFor(c, fx.new_tokens) }],
          generation: { maxNewTokens: fx.new_tokens, cache, ignoreEos: true },
        });
        assert.equal(r.cache, cache ? mode : 'none');
        assert.deepEqual(r.invokes[0]!.tokens, fx.prompt.ids, `${v.label}: the prompt tokenizes as transformers does`);
        if (cache || !c.intervention)
          assert.deepEqual(r.invokes[0]!.generated, c.tokens, `${v.label} ${c.name} cache ${cache}: tokens`);
        const steps = value(r.invokes[0]!.result) as Tensor[];
        steps.forEach((got, i) => {
          // Uncached, step k ≥ 1 recomputes every position, and the swap zeroes them all (PyTorch: the new one only).
          if (!cache && c.intervention && (i > c.intervention.step || (i === c.intervention.step && i > 0))) return;
          const d = maxAbsDiff(got, want.slice(i));
          worst = Math.max(worst, d);
          assert.ok(d <= fx.tolerance, `${v.label} ${c.name} cache ${cache} step ${i}: max |runtime - PyTorch| = ${d}`);
          if (c.intervention && i > c.intervention.step) {
            const moved = maxAbsDiff(want.slice(i), plain.slice(i));
            assert.ok(
              moved > 10 * fx.tolerance,
              `${v.label} ${c.name}: PyTorch's step ${i} moved by ${moved} (the swap reaches later steps through the cache)`,
            );
          }
        });
      }
    }
    console.log(`${v.label} (${mode}): worst max |runtime - PyTorch| ${worst.toExponential(2)}`);
  });
}
