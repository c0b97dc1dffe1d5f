// The tensor API's ops against PyTorch (tests/fixtures/tensor-ops.json, scripts/reference/record_tensor_ops.py):
// each op's values, and the gradient of sum(out · cos(2 + k)) with respect to its inputs through the block's tape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import '../../gpu-agent/block/api/ops/index.js';
import { lossGradients } from '../../gpu-agent/block/api/tape.js';
import { InterleaveError } from '../../gpu-agent/block/api/block-errors.js';
import { repoRoot } from '../runtime/tiny-model.js';

const ref = JSON.parse(readFileSync(join(repoRoot, 'tests', 'fixtures', 'tensor-ops.json'), 'utf8')) as {
  cases: Record<string, { shape: number[]; value: number[]; grad_x: number[]; grad_y: number[] }>;
};

const init = (f: (k: number) => number, shape: number[]) =>
  Tensor.from(
    Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, k) => f(k + 1)),
    shape,
  );

const idx = Tensor.from([0, 2, 1, 0, 1, 1, 0, 2, 2, 0, 2, 1], [3, 4], 'int64');
const OPS: Record<string, (x: Tensor, y: Tensor) => Tensor> = {
  relu: (x) => x.relu(),
  gelu: (x) => x.gelu(),
  silu: (x) => x.silu(),
  tanh: (x) => x.tanh(),
  sigmoid: (x) => x.sigmoid(),
  clamp: (x) => x.clamp(-0.5, 1.0),
  maximum: (x, y) => x.maximum(y),
  minimum: (x, y) => x.minimum(y),
  where: (x, y) =>
    x.where(
      x.detach().map((v) => (v > 0 ? 1 : 0)),
      y,
    ),
  cat: (x, y) => Tensor.cat([x, y], 1),
  stack: (x, y) => Tensor.stack([x, y], 1),
  permute: (x) => x.reshape([3, 2, 2]).permute(2, 0, 1),
  expand: (x, y) => x.slice([0, 1]).expand([3, 4]).mul(y),
  gather: (x) => x.gather(0, idx),
  scatterAdd: (x, y) => x.scatterAdd(0, idx.slice([0, 2]), y.slice([0, 2])),
  cumsum: (x) => x.cumsum(1),
  sort: (x) => x.sort(1, true).values,
  norm: (x) => x.norm(2, 1),
  cosineSimilarity: (x, y) => x.cosineSimilarity(y, 1),
  mseLoss: (x, y) => x.mseLoss(y),
  crossEntropy: (x) => x.crossEntropy([3, 0, 2]),
  einsum: (x, y) => Tensor.einsum('ij,kj->ik', x, y),
  einsumSum: (x, y) => Tensor.einsum('ij,ij->j', x, y),
  squeezeFlatten: (x) => x.unsqueeze(0).flatten(1).squeeze(0),
};

for (const [name, op] of Object.entries(OPS)) {
  test(`${name}: values and gradients equal PyTorch's within 1e-5`, () => {
    const want = ref.cases[name];
    assert.ok(want, `the fixture records ${name}`);
    const x = init((k) => 2 * Math.sin(k), [3, 4]).requiresGrad_();
    const y = init(Math.cos, [3, 4]).requiresGrad_();
    const out = op(x, y);
    assert.deepEqual([...out.shape], want!.shape, 'shape');
    want!.value.forEach((v, i) => {
      assert.ok(Math.abs(out.flat(i) - v) <= 1e-5, `value ${i}: ${out.flat(i)} vs ${v}`);
    });
    const loss = out.ndim === 0 ? out : out.mul(init((k) => Math.cos(k + 1), [...out.shape])).sum();
    for (const { param, grad } of lossGradients(loss).params) param.accumulateGrad(grad);
    for (const [t, g] of [
      [x, want!.grad_x],
      [y, want!.grad_y],
    ] as const) {
      const got = t.grad;
      g.forEach((v, i) => {
        const have = got ? got.flat(i) : 0;
        assert.ok(Math.abs(have - v) <= 1e-5, `grad ${t === x ? 'x' : 'y'} ${i}: ${have} vs ${v}`);
      });
    }
  });
}

test('seeded random tensors repeat with their seed and differ across seeds', () => {
  const a = Tensor.randn([1000], 5);
  assert.deepEqual(Array.from(a.data as Float32Array), Array.from(Tensor.randn([1000], 5).data as Float32Array));
  assert.notDeepEqual(Array.from(a.data as Float32Array), Array.from(Tensor.randn([1000], 6).data as Float32Array));
  const mean = a.mean().item();
  const sd = Math.sqrt(a.pow(2).mean().item() - mean * mean);
  assert.ok(Math.abs(mean) < 0.1 && Math.abs(sd - 1) < 0.1, `normal: mean ${mean}, sd ${sd}`);
  const u = Tensor.rand([1000], 1);
  assert.ok(u.min().item() >= 0 && u.max().item() < 1);
});

test('.grad of a tensor that is not trainable is a coded error; of a trainable one before any backward, null', () => {
  assert.throws(
    () => Tensor.zeros([2]).grad,
    (e: unknown) => e instanceof InterleaveError && e.type === 'GradNotRequired' && /requiresGrad_\(\)/.test(e.message),
  );
  assert.equal(Tensor.zeros([2]).requiresGrad_().grad, null);
});

test('a tape deeper than the limit is a coded error, not memory exhaustion', () => {
  let t = Tensor.zeros([1]).requiresGrad_();
  assert.throws(
    () => {
      for (let i = 0; i < 200_000; i++) t = t.add(1);
    },
    (e: unknown) => e instanceof InterleaveError && e.type === 'TapeLimit',
  );
});
