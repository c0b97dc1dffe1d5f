// The block side's tape (gpu-agent/block/api/tape.ts): every differentiable tensor op against central finite
// differences, and the refusals (an op without a derivative, a value written in place after use, a loss that is
// not one element or not computed from the model).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { dense, leafGradients } from '../../gpu-agent/block/api/tape.js';
import { InterleaveError } from '../../gpu-agent/block/api/block-errors.js';

const owner = { backward: () => Promise.resolve() };

function leaf(shape: number[], seed: number, positive = false): Tensor {
  let s = seed;
  const next = () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
  const t = Tensor.from(
    Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (positive ? 0.5 + next() : next() * 2 - 1)),
    shape,
  );
  t.tape = {
    op: 'leaf',
    inputs: [],
    args: [],
    out: t,
    outVersion: 0,
    leaf: { addr: `x${seed}.output.0`, index: 0, step: 0, owner },
  };
  return t;
}

/** Checks d f / d leaf against (f(x + εv) − f(x − εv)) / 2ε for a random direction v, for every leaf. */
function check(name: string, leaves: Tensor[], f: (xs: Tensor[]) => Tensor): void {
  const grads = leafGradients(f(leaves));
  leaves.forEach((x, i) => {
    const found = grads.find((l) => l.leaf === x.tape!.leaf)?.grad;
    const g = found ? dense(found) : undefined;
    const v = Array.from({ length: x.size }, (_, k) => Math.cos(k * 2.3 + i));
    const eps = 1e-3;
    const shifted = (sign: number) =>
      leaves.map((y, j) =>
        j === i
          ? Tensor.from(
              Array.from({ length: y.size }, (_, k) => y.flat(k) + sign * eps * v[k]!),
              y.shape,
            )
          : Tensor.from(y.data as Float32Array, y.shape),
      );
    const numeric = (f(shifted(1)).item() - f(shifted(-1)).item()) / (2 * eps);
    let analytic = 0;
    if (g) for (let k = 0; k < x.size; k++) analytic += g.flat(k) * v[k]!;
    assert.ok(
      Math.abs(analytic - numeric) <= 2e-3 * (1 + Math.abs(numeric)),
      `${name}: d/dx${i} analytic ${analytic} vs numeric ${numeric}`,
    );
  });
}

test('the difference of two logits (index, slice, sub) seeds only those two logits, sparse', () => {
  const logits = leaf([1, 16, 40], 1);
  const last = logits.slice(0, -1);
  const [g] = leafGradients(last.slice(7).sub(last.slice(3)));
  assert.ok(!(g!.grad instanceof Tensor), 'the gradient stays sparse');
  const d = dense(g!.grad);
  assert.equal(d.get(0, 15, 7), 1);
  assert.equal(d.get(0, 15, 3), -1);
  assert.equal(d.sum().item(), 0);
  assert.equal(d.abs().sum().item(), 2);
});

test('tape derivatives match finite differences', () => {
  check(
    'add/sub/mul/div with broadcasting',
    [leaf([2, 3, 4], 2), leaf([4], 3, true), leaf([3, 1], 4, true)],
    ([a, b, c]) => a!.add(b!).mul(c!).sub(a!.div(b!)).sum(),
  );
  check('sum and mean over dims, keepdim', [leaf([2, 3, 4], 5)], ([a]) =>
    a!.sum(1).mul(a!.mean(-1, true).sum(1)).mean(),
  );
  check('max and min', [leaf([3, 5], 6)], ([a]) => a!.max(1).sum().add(a!.min(0, true).sum()).add(a!.max()));
  check('softmax', [leaf([2, 5], 7)], ([a]) =>
    a!
      .softmax(-1)
      .mul(Tensor.from([1, 2, 3, 4, 5]))
      .sum(),
  );
  check('logSoftmax of logits (the log-probability of a token)', [leaf([1, 3, 6], 8)], ([a]) =>
    a!.logSoftmax(-1).slice(0, -1, 2),
  );
  check('topk values', [leaf([2, 6], 9)], ([a]) =>
    a!
      .topk(2)
      .values.mul(Tensor.from([1, -2]))
      .sum(),
  );
  check('transpose, reshape, clone, to', [leaf([2, 3, 4], 10)], ([a]) =>
    a!.transpose(0, 2).reshape([4, 6]).clone().to('float32').mul(Tensor.arange(6)).sum(),
  );
  check('matmul 2-d, batched and 1-d', [leaf([2, 3, 4], 11), leaf([4, 5], 12), leaf([5], 13)], ([a, b, v]) =>
    a!
      .matmul(b!)
      .matmul(v!)
      .sum()
      .add(v!.matmul(b!.transpose(0, 1)).sum()),
  );
  check('exp, log, sqrt, abs, pow, neg', [leaf([6], 14, true)], ([a]) =>
    a!.exp().add(a!.log()).add(a!.sqrt()).add(a!.sub(0.7).abs()).add(a!.pow(3)).add(a!.neg()).sum(),
  );
  check(
    'setSlice: a taped value written into a constant, and into a taped tensor',
    [leaf([2, 4], 15), leaf([2], 16)],
    ([a, b]) => {
      const t = Tensor.zeros([2, 4]);
      t.setSlice([null, [1, 3]], a!.slice(null, [0, 2]));
      const u = a!.mul(1);
      u.setSlice([null, 3], b!);
      return t.mul(u).sum();
    },
  );
  check('index', [leaf([3, 4], 17)], ([a]) => a!.index(1).mul(a!.index(2)).sum());
});

test('refusals: map(), a value written in place after use, a loss of many elements, a loss not from the model', () => {
  const a = leaf([3], 20);
  assert.throws(
    () => leafGradients(a.map((x) => x * x).sum()),
    (e: unknown) => e instanceof InterleaveError && e.type === 'NotDifferentiable' && /map\(\)/.test(e.message),
  );
  const b = leaf([3], 21);
  const c = leaf([3], 22);
  const prod = b.mul(c);
  b.setSlice([0], 5);
  assert.throws(
    () => leafGradients(prod.sum()),
    (e: unknown) => e instanceof InterleaveError && e.type === 'BackwardError' && /modified in place/.test(e.message),
  );
  assert.throws(
    () => leafGradients(leaf([2], 23).mul(2)),
    (e: unknown) => e instanceof InterleaveError && e.type === 'BackwardError' && /one element/.test(e.message),
  );
  assert.throws(
    () => leafGradients(Tensor.from([1, 2]).sum()),
    (e: unknown) =>
      e instanceof InterleaveError &&
      e.type === 'BackwardError' &&
      /not computed from values of the model/.test(e.message),
  );
  assert.throws(() => Tensor.from([1]).backward(), /not computed from values of the model/);
});

test('fill() makes a tensor a constant; ops on constants record nothing', () => {
  const a = leaf([3], 30);
  const b = a.mul(2);
  b.fill(1);
  assert.equal(b.tape, undefined);
  assert.equal(Tensor.from([1, 2]).add(1).tape, undefined);
});
