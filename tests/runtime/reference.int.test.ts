// The runtime against a real peer: tests/fixtures/gpt2-reference holds a 2-layer GPT-2 exported by
// torch.onnx.export (TorchScript and dynamo) and activations PyTorch recorded with forward hooks, plain and with
// one module's output or input zeroed. Blocks read the same modules (and zero the same one) through the
// runtime; every recorded tensor must match within the fixture's tolerance (1e-4 absolute).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { fixtureDir, maxAbsDiff, run, value } from './tiny-model.js';
import { readSafetensors } from './hf-fixtures.js';

interface Case {
  name: string;
  intervention: null | { path: string; point: 'output' | 'input'; what: 'zeros' };
  tensors: Record<string, string>;
}

interface Reference {
  format: string;
  tolerance: number;
  input_ids: number[][];
  cases: Case[];
}

const ref = JSON.parse(readFileSync(join(fixtureDir, 'reference.json'), 'utf8')) as Reference;
const recorded = readSafetensors(join(fixtureDir, 'reference.safetensors'));
const models: HostedModel[] = [];
const temp: string[] = [];

after(async () => {
  await Promise.all(models.map((m) => m.close()));
  for (const d of temp) rmSync(d, { recursive: true, force: true });
});

/** `transformer.h.0.mlp.output` → `m.transformer.h[0].mlp.output`; `logits` → `m.output`. */
function accessor(key: string): string {
  if (key === 'logits') return 'm.output';
  return `m.${key.replace(/\.(\d+)(?=\.|$)/g, '[$1]')}`;
}

/** A block reading every recorded key in forward order, zeroing the intervened point when it gets there. */
function blockFor(c: Case, order: string[]): string {
  const rank = (k: string) => (k === 'logits' ? order.length : order.indexOf(k));
  const keys = Object.keys(c.tensors).sort((a, b) => rank(a) - rank(b));
  for (const k of keys) assert.ok(rank(k) >= 0, `${k} is an observable point of the model`);
  const lines = ['async (m) => {', '  const out = {};'];
  for (const k of keys) {
    const iv = c.intervention;
    if (iv && `${iv.path}.${iv.point}` === k) {
      lines.push(`  { const v = await ${accessor(k)}; ${accessor(k)} = v.zerosLike(); }`);
    }
    lines.push(`  out[${JSON.stringify(k)}] = await ${accessor(k)};`);
  }
  lines.push('  return out;', '}');
  return lines.join('\n');
}

async function checkModel(hm: HostedModel, label: string): Promise<void> {
  const order = hm.manifest().order;
  const rows = ref.input_ids;
  let worst = 0;
  for (const c of ref.cases) {
    const block = blockFor(c, order);
    // One invoke per batch row: each block sees (and zeroes) its own row, as the hook did for the whole batch.
    const r = await run(hm, { invokes: rows.map((tokens) => ({ tokens, block })) });
    for (const [key, name] of Object.entries(c.tensors)) {
      const want = recorded.get(name);
      assert.ok(want, `${name} is in reference.safetensors`);
      rows.forEach((_, i) => {
        const got = (value(r.invokes[i]!.result) as Record<string, Tensor>)[key]!;
        // Tensors without a batch dimension (wpe's output has batch 1) are the same for every row.
        const expected = want.shape[0] === rows.length ? want.slice([i, i + 1]) : want;
        const d = maxAbsDiff(got, expected);
        worst = Math.max(worst, d);
        assert.ok(
          d <= ref.tolerance,
          `${label} ${c.name} ${key} row ${i}: max |runtime - PyTorch| = ${d} > ${ref.tolerance} (shapes [${got.shape.join(', ')}] vs [${expected.shape.join(', ')}])`,
        );
      });
    }
  }
  console.log(`${label}: worst max |runtime - PyTorch| over ${ref.cases.length} cases: ${worst.toExponential(2)}`);
}

test('fixture format is the one this test reads', () => {
  assert.equal(ref.format, 'ndif-reference/1');
  assert.ok(ref.tolerance <= 1e-4);
  assert.deepEqual(
    ref.cases.map((c) => c.intervention?.point ?? null),
    [null, 'output', 'input'],
  );
});

test('TorchScript export: activations and logits match PyTorch within 1e-4, plain and intervened', async () => {
  const hm = await loadModel(fixtureDir, { key: 'gpt2-reference' });
  models.push(hm);
  await checkModel(hm, 'model.onnx');
});

test('dynamo export (pkg.torch.onnx.name_scopes): activations and logits match PyTorch within 1e-4', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-ref-dynamo-'));
  temp.push(dir);
  symlinkSync(join(fixtureDir, 'model-dynamo.onnx'), join(dir, 'model.onnx'));
  symlinkSync(join(fixtureDir, 'config.json'), join(dir, 'config.json'));
  const hm = await loadModel(dir, { key: 'gpt2-reference-dynamo' });
  models.push(hm);
  await checkModel(hm, 'model-dynamo.onnx');
});
