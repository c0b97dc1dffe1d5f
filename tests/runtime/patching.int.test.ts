// Activation patching against PyTorch (tests/fixtures/hf/<family>/patching.*, recorded by
// scripts/reference/record_patching.py): the corrupt prompt run with one layer's output at one position replaced by
// the clean run's, for every layer and position, written three ways — two requests (read the clean value, then send
// it in a second request), one request whose clean invoke hands the value to the patching invokes at a barrier in the
// same forward batch, and a session whose first trace caches the clean run and whose second patches — and each within
// 1e-4 of PyTorch's last-position logits. A cache equals individual reads bit for bit, without a cut per point.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { maxAbsDiff, run, sameBits, value } from './tiny-model.js';
import { hfDir, moduleExpr, readSafetensors, variants } from './hf-fixtures.js';

interface Patching {
  tolerance: number;
  clean: { text: string; ids: number[]; last: string; layers: string[] };
  corrupt: { text: string; ids: number[]; last: string };
  layers: string;
  patches: Array<{ layer: number; position: number; last: string }>;
}

const VARIANTS = ['gpt2/torchscript', 'gpt2/with-past', 'llama/dynamo', 'qwen2/dynamo'];
const loaded: HostedModel[] = [];
after(async () => {
  for (const hm of loaded) await hm.close();
});

function fixture(family: string): { doc: Patching; tensors: Map<string, Tensor> } {
  return {
    doc: JSON.parse(readFileSync(join(hfDir, family, 'patching.json'), 'utf8')) as Patching,
    tensors: readSafetensors(join(hfDir, family, 'patching.safetensors')),
  };
}

function check(label: string, got: Tensor, want: Tensor, tolerance: number): number {
  assert.deepEqual(got.shape, want.shape, `${label}: shape`);
  const d = maxAbsDiff(got, want);
  assert.ok(d <= tolerance, `${label}: max |runtime − PyTorch| = ${d} > ${tolerance}`);
  return d;
}

for (const label of VARIANTS) {
  const v = variants().find((x) => x.label === label)!;
  const { doc, tensors } = fixture(v.family);
  const L = moduleExpr(doc.layers);
  const positions = doc.clean.ids.length;
  const layerCount = doc.clean.layers.length;
  let hmp: Promise<HostedModel> | undefined;
  const model = () =>
    (hmp ??= loadModel(v.dir, { key: v.label }).then((hm) => {
      loaded.push(hm);
      return hm;
    }));
  const patchRow = (shared: string, p: number) =>
    `const v = h.clone(); v.setSlice([0, ${p}], ${shared}.slice(0, ${p}));`;

  test(`${label}: a two-request patch (read the clean value, send it in a second request) equals PyTorch`, async () => {
    const hm = await model();
    const clean = await run(hm, {
      invokes: [
        {
          tokens: doc.clean.ids,
          block: `async (m) => { const out = []; for (const b of ${L}) out.push(await b.output); return out; }`,
        },
      ],
    });
    const cleanLayers = value(clean.invokes[0]!.result) as Tensor[];
    cleanLayers.forEach((t, l) => {
      check(`clean layer ${l}`, t, tensors.get(doc.clean.layers[l]!)!, doc.tolerance);
    });
    for (const pt of doc.patches.filter((x) => x.position % 2 === 0 || x.layer === layerCount - 1)) {
      const row = JSON.stringify(Array.from(cleanLayers[pt.layer]!.slice(0, pt.position).data as Float32Array));
      const block = `async (m, ctx) => { const h = await ${L}[${pt.layer}].output; const v = h.clone(); v.setSlice([0, ${pt.position}], ctx.Tensor.from(${row})); ${L}[${pt.layer}].output = v; return (await m.output).slice(0, -1); }`;
      const r = await run(hm, { invokes: [{ tokens: doc.corrupt.ids, block }] });
      check(
        `layer ${pt.layer} position ${pt.position}`,
        value(r.invokes[0]!.result) as Tensor,
        tensors.get(pt.last)!,
        doc.tolerance,
      );
    }
  });

  test(`${label}: a barrier-based patch of every layer and position in one forward batch equals PyTorch`, async () => {
    const hm = await model();
    const parties = positions + 1;
    const cleanBlock = `async (m, ctx) => {
      for (let l = 0; l < ${L}.length; l++) {
        ctx.shared['h' + l] = await ${L}[l].output;
        await ctx.barrier('h' + l, ${parties});
      }
      return (await m.output).slice(0, -1);
    }`;
    const patchBlock = (l: number, p: number) => `async (m, ctx) => {
      const h = await ${L}[${l}].output;
      await ctx.barrier('h${l}', ${parties});
      ${patchRow(`ctx.shared.h${l}`, p)}
      ${L}[${l}].output = v;
      return (await m.output).slice(0, -1);
    }`;
    const invokes = [
      { tokens: doc.clean.ids, block: cleanBlock },
      ...doc.patches.map((pt) => ({ tokens: doc.corrupt.ids, block: patchBlock(pt.layer, pt.position) })),
    ];
    const r = await run(hm, { invokes });
    check('clean', value(r.invokes[0]!.result) as Tensor, tensors.get(doc.clean.last)!, doc.tolerance);
    doc.patches.forEach((pt, i) => {
      check(
        `layer ${pt.layer} position ${pt.position}`,
        value(r.invokes[i + 1]!.result) as Tensor,
        tensors.get(pt.last)!,
        doc.tolerance,
      );
    });
    // One forward pass: a cut at each layer, not a pass per invoke.
    assert.ok(r.timings.segmentRuns <= layerCount + 1, `${r.timings.segmentRuns} segment runs`);
  });

  test(`${label}: a session (trace 0 caches the clean run, trace 1 patches every layer and position) equals PyTorch`, async () => {
    const hm = await model();
    const traces = [
      {
        invokes: [
          {
            tokens: doc.clean.ids,
            block: `async (m, ctx) => { ctx.shared.clean = await ctx.cache({ modules: [${L}] }); return 'cached'; }`,
          },
        ],
      },
      {
        invokes: doc.patches.map((pt) => ({
          tokens: doc.corrupt.ids,
          block: `async (m, ctx) => { const h = await ${L}[${pt.layer}].output; ${patchRow(`ctx.shared.clean.${doc.layers}[${pt.layer}].output`, pt.position)} ${L}[${pt.layer}].output = v; return (await m.output).slice(0, -1); }`,
        })),
      },
    ];
    const events: string[] = [];
    const s = await hm.runSession({ traces, onTrace: (e) => events.push(`${e.trace}/${e.traces} ${e.status}`) }, () =>
      createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
    );
    assert.deepEqual(events, ['0/2 RUNNING', '0/2 COMPLETED', '1/2 RUNNING', '1/2 COMPLETED']);
    assert.equal(s.traces.length, 2);
    assert.equal(value(s.traces[0]!.invokes[0]!.result), 'cached');
    doc.patches.forEach((pt, i) => {
      check(
        `layer ${pt.layer} position ${pt.position}`,
        value(s.traces[1]!.invokes[i]!.result) as Tensor,
        tensors.get(pt.last)!,
        doc.tolerance,
      );
    });
    // The clean trace's cache cut the pass once, at its last point: it runs the segments of a read of that point alone
    // (one per layer piece, docs/runtime.md), not one more per cached layer.
    const lastOnly = await run(hm, {
      invokes: [{ tokens: doc.clean.ids, block: `async (m) => { await ${L}[${layerCount - 1}].output; }` }],
    });
    assert.equal(s.traces[0]!.timings.segmentRuns, lastOnly.timings.segmentRuns);
  });

  test(`${label}: a cache equals individual reads of the same points, bit for bit`, async () => {
    const hm = await model();
    const cached = await run(hm, {
      invokes: [{ tokens: doc.clean.ids, block: `async (m, ctx) => ctx.cache({ inputs: true })` }],
    });
    const tree = value(cached.invokes[0]!.result) as Record<string, unknown>;
    const points: Array<{ path: string; leaf: Record<string, unknown> }> = [];
    const walk = (node: unknown, path: string) => {
      if (node instanceof Tensor || node === null || typeof node !== 'object') return;
      const rec = node as Record<string, unknown>;
      if ('output' in rec || 'inputs' in rec) points.push({ path, leaf: rec });
      for (const [k, c] of Object.entries(rec))
        if (k !== 'output' && k !== 'input' && k !== 'inputs') walk(c, path === '' ? k : `${path}.${k}`);
    };
    walk(tree, '');
    assert.ok(points.length > 10, `${points.length} modules cached`);
    const manifest = hm.manifest();
    const order = new Map(manifest.order.map((k, i) => [k, i]));
    const reads = points.flatMap((p) =>
      ['output', 'input'].filter((pt) => order.has(`${p.path}.${pt}`)).map((pt) => ({ path: p.path, point: pt })),
    );
    reads.sort((a, b) => order.get(`${a.path}.${a.point}`)! - order.get(`${b.path}.${b.point}`)!);
    const block = `async (m) => { const out = {}; ${reads.map((r) => `out[${JSON.stringify(`${r.path}.${r.point}`)}] = await ${moduleExpr(r.path)}.${r.point}s;`).join(' ')} return out; }`;
    const individual = value(
      (await run(hm, { invokes: [{ tokens: doc.clean.ids, block }] })).invokes[0]!.result,
    ) as Record<string, Tensor[]>;
    for (const r of reads) {
      const leaf = points.find((p) => p.path === r.path)!.leaf;
      const fromCache = r.point === 'output' ? ([leaf.output].flat() as Tensor[]) : (leaf.inputs as Tensor[]);
      const read = individual[`${r.path}.${r.point}`]!;
      assert.equal(fromCache.length, read.length, `${r.path}.${r.point}: tensor count`);
      fromCache.forEach((t, i) => {
        assert.ok(sameBits(t, read[i]!), `${r.path}.${r.point}[${i}]: the cache and the read differ`);
      });
    }
    const plain = await run(hm, {
      invokes: [{ tokens: doc.clean.ids, block: `async (m) => { await ${L}[0].input; }` }],
    });
    assert.ok(
      cached.timings.segmentRuns <= plain.timings.segmentRuns + 1,
      `the cache ran ${cached.timings.segmentRuns} segments`,
    );
  });
}
