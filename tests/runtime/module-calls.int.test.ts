// Module calls against PyTorch applying the modules by hand (tests/fixtures/hf/<family>/module-calls.*, recorded by
// scripts/reference/record_module_calls.py): the logit lens — `lm_head.call(norm.call(h_i))` for every layer's output
// h_i, over every position and over the last one only — and BERT's pooler applied to every encoder layer's output,
// for every float32 variant (TorchScript, dynamo, with-past, external data), within the fixture's 1e-4 (float16: its own
// forward reference, at float16 tolerance). Calls of
// modules that are not self-contained sub-graphs (an attention) are refused with NotCallable naming the module and
// the tensor it reads from outside, at the user's line; a module's call sub-graph is compiled once and cached.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InterventionError, loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbsDiff, run, value } from './tiny-model.js';
import { hfDir, moduleExpr, readReference, readSafetensors, variants } from './hf-fixtures.js';

interface CallsFixture {
  family: string;
  tolerance: number;
  prompt: { text: string; ids: number[] };
  layers: string;
  norm: string | null;
  head: string;
  calls: Array<{ layer: number; hidden: string; lens: string; normed?: string; lens_last?: string }>;
}

const loaded: HostedModel[] = [];
after(async () => {
  for (const hm of loaded) await hm.close();
});

function fixture(family: string): { doc: CallsFixture; tensors: Map<string, Tensor> } | undefined {
  const file = join(hfDir, family, 'module-calls.json');
  if (!existsSync(file)) return undefined;
  return {
    doc: JSON.parse(readFileSync(file, 'utf8')) as CallsFixture,
    tensors: readSafetensors(join(hfDir, family, 'module-calls.safetensors')),
  };
}

/** The logit lens (or BERT's pooler lens) at every layer, as a researcher writes it. */
function lensBlock(doc: CallsFixture): string {
  const layers = moduleExpr(doc.layers);
  const head = moduleExpr(doc.head);
  const norm = doc.norm === null ? null : moduleExpr(doc.norm);
  return `async (m) => {
  const out = [];
  for (let i = 0; i < ${layers}.length; i++) {
    const hidden = await ${layers}[i].output;
    ${
      norm === null
        ? `out.push({ hidden, lens: await ${head}.call(hidden) });`
        : `const normed = await ${norm}.call(hidden);
    const last = await ${head}.call(await ${norm}.call(hidden.slice(null, [-1])));
    out.push({ hidden, normed, lens: await ${head}.call(normed), last });`
    }
  }
  return out;
}`;
}

for (const v of variants()) {
  const f = fixture(v.family);
  const float16 = v.name === 'float16' || v.name === 'snapshot-float16';
  if (float16) {
    // The module-calls fixture is PyTorch float32; the float16 export has its own forward reference (float16
    // tolerance): every layer's hidden state is the recorded one, and the lens at the last layer is the model's own
    // final norm and logits, since the model applies exactly those modules after it.
    test(`module calls on ${v.label}: the logit lens at the last layer equals the float16 reference's final norm and logits`, {
      skip: !f ? 'no module-calls fixture' : false,
    }, async () => {
      const { doc } = f!;
      const ref = readReference(v.referenceDir);
      const want = readSafetensors(join(v.referenceDir, 'reference.safetensors'));
      const plain = ref.cases.find((c) => c.name === 'plain')!;
      const hm = await loadModel(v.dir, { key: v.label });
      loaded.push(hm);
      for (const [i, prompt] of ref.prompts.entries()) {
        const r = await run(hm, { invokes: [{ prompt: prompt.text, block: lensBlock(doc) }] });
        const got = value(r.invokes[0]!.result) as Array<Record<string, Tensor>>;
        const keys = plain.tensors[i]!;
        for (const [layer, g] of got.entries()) {
          const hidden = keys[`${doc.layers}.${layer}.output`];
          if (hidden)
            assert.ok(
              maxAbsDiff(g.hidden!, want.get(hidden)!) <= ref.tolerance,
              `${v.label} prompt ${i} layer ${layer} hidden`,
            );
        }
        const last = got[got.length - 1]!;
        const dn = maxAbsDiff(last.normed!, want.get(keys[`${doc.norm}.output`]!)!);
        const dl = maxAbsDiff(last.lens!, want.get(keys.logits!)!);
        assert.ok(
          dn <= ref.tolerance && dl <= ref.tolerance,
          `${v.label} prompt ${i}: norm ${dn}, logits ${dl} > ${ref.tolerance}`,
        );
      }
    });
    continue;
  }
  test(`module calls on ${v.label}: the ${v.family === 'bert' ? 'pooler' : 'logit'} lens at every layer equals PyTorch applying the modules by hand`, {
    skip: !f ? 'no module-calls fixture' : false,
  }, async () => {
    const { doc, tensors } = f!;
    const hm = await loadModel(v.dir, { key: v.label });
    loaded.push(hm);
    const r = await run(hm, { invokes: [{ prompt: doc.prompt.text, block: lensBlock(doc) }] });
    assert.deepEqual(r.invokes[0]!.tokens, doc.prompt.ids);
    const got = value(r.invokes[0]!.result) as Array<Record<string, Tensor>>;
    assert.equal(got.length, doc.calls.length);
    let worst = 0;
    for (const c of doc.calls) {
      const g = got[c.layer]!;
      const pairs: Array<[string, Tensor, string]> = [
        ['hidden', g.hidden!, c.hidden],
        ['lens', g.lens!, c.lens],
      ];
      if (c.normed) pairs.push(['normed', g.normed!, c.normed], ['last', g.last!, c.lens_last!]);
      for (const [what, t, key] of pairs) {
        const want = tensors.get(key)!;
        assert.deepEqual(t.shape, want.shape, `${v.label} layer ${c.layer} ${what}: shape`);
        const d = maxAbsDiff(t, want);
        worst = Math.max(worst, d);
        assert.ok(
          d <= doc.tolerance,
          `${v.label} layer ${c.layer} ${what}: max |runtime − PyTorch| = ${d} > ${doc.tolerance}`,
        );
      }
    }
    assert.ok(r.timings.calls >= doc.calls.length, 'the calls ran as calls');
    // Compiled once: the same block again compiles nothing.
    const again = await run(hm, { invokes: [{ prompt: doc.prompt.text, block: lensBlock(doc) }] });
    assert.equal(again.timings.segmentsCompiled, 0);
    assert.ok(worst <= doc.tolerance);
  });
}

test("a module that is not a self-contained sub-graph is refused, naming it, what it reads and the user's line", async () => {
  const v = variants().find((x) => x.label === 'gpt2/torchscript')!;
  const hm = await loadModel(v.dir, { key: v.label });
  loaded.push(hm);
  const source = [
    'async (m) => {',
    '  const x = await m.transformer.h[1].attn.inputs;',
    '  return await m.transformer.h[1].attn.call(x);',
    '}',
  ].join('\n');
  const err = await run(hm, { invokes: [{ prompt: 'Hello world', block: source }] }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof InterventionError, String(err));
  assert.equal(err.code, 'BLOCK_NOT_CALLABLE');
  assert.match(
    err.blockError.message,
    /transformer\.h\.1\.attn is not a self-contained sub-graph: besides its inputs it reads /,
  );
  assert.match(err.blockError.stack ?? '', /block-0\.js:3:/, "the failed call names the user's line");
  // A caught refusal leaves the request running; wrong shapes fail at the call, locally.
  const ok = await run(hm, {
    invokes: [
      {
        prompt: 'Hello world',
        block: `async (m, ctx) => {
        const h = await m.transformer.h[0].output;
        const errors = [];
        try { await m.transformer.h[1].attn.call(await m.transformer.h[1].attn.inputs); } catch (e) { errors.push(e.name); }
        try { await m.lm_head.call(ctx.Tensor.zeros([1, 3, 7])); } catch (e) { errors.push(e.name); }
        try { await m.transformer.h.call(h); } catch (e) { errors.push(e.name); }
        try { await m.call(h); } catch (e) { errors.push(e.name); }
        return { errors, logits: (await m.output).shape };
      }`,
      },
    ],
  });
  // h[1].attn.inputs comes after h[0]: reading it is fine; its call is refused; the rest fail before anything is sent.
  assert.deepEqual(value(ok.invokes[0]!.result), {
    errors: ['NotCallable', 'ShapeMismatch', 'NotCallable', 'NotCallable'],
    logits: [1, 2, 512],
  });
});

test("dynamo exports: a module whose reshape reads the model's input shape from outside is refused; its norm and head are not", async () => {
  const v = variants().find((x) => x.label === 'gpt2/dynamo')!;
  const hm = await loadModel(v.dir, { key: v.label });
  loaded.push(hm);
  const r = await run(hm, {
    invokes: [
      {
        prompt: 'Hello world',
        block: `async (m) => {
        const x = await m.transformer.h[1].mlp.input;
        let refused;
        try { await m.transformer.h[1].mlp.call(x); } catch (e) { refused = e.message; }
        const h = await m.transformer.h[1].output;
        return { refused, lens: (await m.lm_head.call(await m.transformer.ln_f.call(h))).sub(await m.output).abs().max().item() };
      }`,
      },
    ],
  });
  const got = value(r.invokes[0]!.result) as { refused: string; lens: number };
  assert.match(
    got.refused,
    /transformer\.h\.1\.mlp is not a self-contained sub-graph: besides its input it reads \S+, which \w+ node .* computes outside it/,
  );
  assert.equal(got.lens, 0, "the last layer's lens is the model's own logits, bit for bit");
});

test('callability is checked first and listed in the manifest: an attention called on one tensor is NotCallable, not a count mismatch; a Llama dynamo MLP is callable bit for bit', async () => {
  const gpt2 = variants().find((x) => x.label === 'gpt2/dynamo')!;
  const g = await loadModel(gpt2.dir, { key: gpt2.label });
  loaded.push(g);
  const mods = new Map(g.manifest().modules.map((m) => [m.path, m]));
  assert.match(mods.get('transformer.h.1.mlp')?.notCallable ?? '', /not a self-contained sub-graph/);
  assert.match(mods.get('transformer.h.1.attn')?.notCallable ?? '', /not a self-contained sub-graph/);
  assert.equal(mods.get('lm_head')?.notCallable, undefined, 'the head is callable');
  assert.equal(mods.get('transformer.ln_f')?.notCallable, undefined, 'the norm is callable');
  const r = await run(g, {
    invokes: [
      {
        prompt: 'Hello world',
        block: `async (m) => {
        const h = await m.transformer.h[0].output;
        try { await m.transformer.h[1].attn.call(h); } catch (e) { return { name: e.name, message: e.message }; }
      }`,
      },
    ],
  });
  const got = value(r.invokes[0]!.result) as { name: string; message: string };
  assert.equal(got.name, 'NotCallable', got.message);
  assert.match(got.message, /transformer\.h\.1\.attn is not a self-contained sub-graph/);

  const llama = variants().find((x) => x.label === 'llama/dynamo');
  assert.ok(llama, 'the llama dynamo fixture exists');
  const l = await loadModel(llama.dir, { key: llama.label });
  loaded.push(l);
  const mlp = l.manifest().modules.find((m) => m.path === 'model.layers.1.mlp');
  assert.ok(mlp, 'llama has model.layers.1.mlp');
  assert.equal(mlp.notCallable, undefined, "a Llama dynamo export's MLP reads only its input");
  const called = await run(l, {
    invokes: [
      {
        prompt: 'Hello world',
        block: `async (m) => {
        const x = await m.model.layers[1].mlp.input;
        const y = await m.model.layers[1].mlp.output;
        return (await m.model.layers[1].mlp.call(x)).sub(y).abs().max().item();
      }`,
      },
    ],
  });
  assert.equal(value(called.invokes[0]!.result), 0, "the call is the MLP's forward, bit for bit");
});
