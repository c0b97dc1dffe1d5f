// Every derivative rule against finite differences, op by op, on onnxruntime (tests/runtime/grad-check.ts): the
// ops the GPT-2, Llama, Qwen2 and BERT exports use, in the forms they use them (broadcasting, weights as
// initializers, negative axes, repeated gather indices), plus the fused forms other exporters write
// (Gelu, SimplifiedLayerNormalization, RMSNormalization, com.microsoft Gelu/FastGelu). Cases marked
// `unknownDims` hide the probed dims so the run-time shape arithmetic of the rules runs too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TensorDataType } from '../../gpu-agent/runtime/onnx/types.js';
import { checkGradient, constFloat, constInts, n } from './grad-check.js';
import type { OpCase } from './grad-check.js';

const F = TensorDataType.FLOAT;
const x = (shape: number[], extra: Partial<OpCase['inputs'][0]> = {}) => ({ name: 'x', shape, ...extra });
const y = (shape: number[], extra: Partial<OpCase['inputs'][0]> = {}) => ({ name: 'y', shape, ...extra });

const unary = (
  op: string,
  fill: 'normal' | 'positive' | 'unit' = 'normal',
  attrs = {},
  opset = 17,
  domain?: string,
): OpCase => ({
  name: `${domain ? `${domain}:` : ''}${op}`,
  opset,
  ...(domain ? { domains: [{ domain, version: 1 }] } : {}),
  inputs: [x([2, 3, 4], { fill })],
  nodes: [n(op, ['x'], ['out'], attrs, domain)],
  outputs: ['out'],
});

const binary = (
  op: string,
  a: number[],
  b: number[],
  fill: 'normal' | 'positive' = 'normal',
  unknownDims = false,
): OpCase => ({
  name: `${op} [${a}] ⊙ [${b}]${unknownDims ? ' (run-time shapes)' : ''}`,
  inputs: [x(a), y(b, { fill })],
  nodes: [n(op, ['x', 'y'], ['out'])],
  outputs: ['out'],
  unknownDims,
});

const CASES: OpCase[] = [
  binary('Add', [2, 3, 4], [4]),
  binary('Add', [2, 1, 4], [3, 1]),
  binary('Add', [2, 1, 4], [3, 1], 'normal', true),
  binary('Sub', [2, 3, 4], [1, 3, 1]),
  binary('Mul', [2, 3, 4], [3, 4]),
  binary('Mul', [1, 3, 4], [2, 3, 1], 'normal', true),
  binary('Div', [2, 3, 4], [2, 1, 4], 'positive'),
  {
    name: 'Pow x^3 (gelu_new)',
    inputs: [x([2, 3, 4])],
    nodes: [constFloat('three', 3, F), n('Pow', ['x', 'three'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Pow x^y',
    inputs: [x([2, 3], { fill: 'positive' }), y([3])],
    nodes: [n('Pow', ['x', 'y'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Sum (variadic)',
    inputs: [x([2, 3]), y([3]), { name: 'z', shape: [2, 1] }],
    nodes: [n('Sum', ['x', 'y', 'z'], ['out'])],
    outputs: ['out'],
  },
  binary('Max', [2, 3, 4], [4]),
  binary('Min', [2, 3, 4], [3, 4]),
  {
    name: 'Where (masking with a constant)',
    inputs: [{ name: 'c', shape: [3, 4], bools: [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0] }, x([2, 3, 4]), y([4])],
    nodes: [n('Where', ['c', 'x', 'y'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Cast float→double→float',
    float32: true,
    inputs: [x([2, 3])],
    nodes: [n('Cast', ['x'], ['h'], { to: TensorDataType.DOUBLE }), n('Cast', ['h'], ['out'], { to: F })],
    outputs: ['out'],
  },
  unary('Neg'),
  unary('Identity'),
  unary('Tanh'),
  unary('Sigmoid'),
  unary('Sqrt', 'positive'),
  unary('Reciprocal', 'positive'),
  unary('Exp'),
  unary('Log', 'positive'),
  unary('Erf'),
  unary('Sin'),
  unary('Cos'),
  unary('Relu'),
  unary('Abs'),
  unary('Gelu', 'normal', {}, 20),
  unary('Gelu', 'normal', { approximate: 'tanh' }, 20),
  unary('Gelu', 'normal', {}, 17, 'com.microsoft'),
  unary('FastGelu', 'normal', {}, 17, 'com.microsoft'),
  {
    name: 'MatMul activation × activation',
    inputs: [x([2, 3, 4]), y([2, 4, 5])],
    nodes: [n('MatMul', ['x', 'y'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'MatMul batch broadcast',
    inputs: [x([2, 1, 3, 4]), y([3, 4, 2])],
    nodes: [n('MatMul', ['x', 'y'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'MatMul against a weight (Gemm path)',
    inputs: [x([2, 3, 4])],
    weights: [{ name: 'w', shape: [4, 5] }],
    nodes: [n('MatMul', ['x', 'w'], ['out'])],
    outputs: ['out'],
  },
  ...[0, 1].flatMap((transA) =>
    [0, 1].map(
      (transB): OpCase => ({
        name: `Gemm transA=${transA} transB=${transB} with bias`,
        inputs: [x(transA ? [4, 3] : [3, 4]), y(transB ? [5, 4] : [4, 5]), { name: 'b', shape: [5] }],
        nodes: [n('Gemm', ['x', 'y', 'b'], ['out'], { transA, transB, alpha: { float: 0.7 }, beta: { float: 1.3 } })],
        outputs: ['out'],
      }),
    ),
  ),
  {
    name: 'LayerNormalization (affine)',
    inputs: [x([2, 3, 8]), { name: 's', shape: [8] }, { name: 'b', shape: [8] }],
    nodes: [n('LayerNormalization', ['x', 's', 'b'], ['out'], { axis: -1, epsilon: { float: 1e-5 } })],
    outputs: ['out'],
  },
  {
    name: 'LayerNormalization over two axes, weights as initializers',
    inputs: [x([2, 3, 4])],
    weights: [
      { name: 's', shape: [3, 4] },
      { name: 'b', shape: [3, 4] },
    ],
    nodes: [n('LayerNormalization', ['x', 's', 'b'], ['out'], { axis: 1 })],
    outputs: ['out'],
  },
  {
    name: 'SimplifiedLayerNormalization (RMSNorm)',
    inputs: [x([2, 3, 8]), { name: 's', shape: [8] }],
    nodes: [n('SimplifiedLayerNormalization', ['x', 's'], ['out'], { axis: -1, epsilon: { float: 1e-6 } })],
    outputs: ['out'],
  },
  {
    name: 'RMSNormalization (opset 23)',
    opset: 23,
    inputs: [x([2, 3, 8]), { name: 's', shape: [8] }],
    nodes: [n('RMSNormalization', ['x', 's'], ['out'], { axis: -1, epsilon: { float: 1e-6 } })],
    outputs: ['out'],
  },
  {
    name: 'RMSNorm decomposed as Llama exports it (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul)',
    opset: 18,
    inputs: [x([2, 3, 8])],
    weights: [{ name: 'w', shape: [8] }],
    nodes: [
      constFloat('two', 2, F),
      constFloat('eps', 1e-6, F),
      constInts('axes', [-1]),
      n('Pow', ['x', 'two'], ['sq']),
      n('ReduceMean', ['sq', 'axes'], ['ms'], { keepdims: 1 }),
      n('Add', ['ms', 'eps'], ['mse']),
      n('Sqrt', ['mse'], ['rt']),
      n('Reciprocal', ['rt'], ['inv']),
      n('Mul', ['x', 'inv'], ['xn']),
      n('Mul', ['w', 'xn'], ['out']),
    ],
    outputs: ['out'],
  },
  {
    name: 'ReduceMean axes attribute (opset 17), keepdims 0',
    inputs: [x([2, 3, 4])],
    nodes: [n('ReduceMean', ['x'], ['out'], { axes: [1], keepdims: 0 })],
    outputs: ['out'],
  },
  {
    name: 'ReduceMean all axes',
    inputs: [x([2, 3, 4])],
    nodes: [n('ReduceMean', ['x'], ['out'], { keepdims: 0 })],
    outputs: ['out'],
  },
  {
    name: 'ReduceMean axes input (opset 18), run-time count',
    opset: 18,
    inputs: [x([2, 3, 4])],
    nodes: [constInts('axes', [0, -1]), n('ReduceMean', ['x', 'axes'], ['out'], { keepdims: 0 })],
    outputs: ['out'],
    unknownDims: true,
  },
  {
    name: 'ReduceSum axes input',
    inputs: [x([2, 3, 4])],
    nodes: [constInts('axes', [1]), n('ReduceSum', ['x', 'axes'], ['out'], { keepdims: 1 })],
    outputs: ['out'],
  },
  {
    name: 'Softmax last axis',
    inputs: [x([2, 3, 5])],
    nodes: [n('Softmax', ['x'], ['out'], { axis: -1 })],
    outputs: ['out'],
  },
  {
    name: 'Softmax axis 1',
    inputs: [x([2, 3, 5])],
    nodes: [n('Softmax', ['x'], ['out'], { axis: 1 })],
    outputs: ['out'],
  },
  {
    name: 'LogSoftmax',
    inputs: [x([2, 3, 5])],
    nodes: [n('LogSoftmax', ['x'], ['out'], { axis: -1 })],
    outputs: ['out'],
  },
  {
    name: 'CumSum',
    inputs: [x([2, 5])],
    nodes: [constInts('axis', [1], true), n('CumSum', ['x', 'axis'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Reshape',
    inputs: [x([2, 3, 4])],
    nodes: [constInts('s', [2, 12]), n('Reshape', ['x', 's'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Reshape (run-time shapes)',
    inputs: [x([2, 3, 4])],
    nodes: [constInts('s', [0, -1]), n('Reshape', ['x', 's'], ['out'])],
    outputs: ['out'],
    unknownDims: true,
  },
  { name: 'Flatten', inputs: [x([2, 3, 4])], nodes: [n('Flatten', ['x'], ['out'], { axis: 1 })], outputs: ['out'] },
  {
    name: 'Squeeze',
    inputs: [x([2, 1, 4])],
    nodes: [constInts('a', [1]), n('Squeeze', ['x', 'a'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Unsqueeze',
    inputs: [x([2, 4])],
    nodes: [constInts('a', [0, 2]), n('Unsqueeze', ['x', 'a'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Transpose',
    inputs: [x([2, 3, 4])],
    nodes: [n('Transpose', ['x'], ['out'], { perm: [2, 0, 1] })],
    outputs: ['out'],
  },
  {
    name: 'Expand',
    inputs: [x([3, 1])],
    nodes: [constInts('s', [2, 3, 4]), n('Expand', ['x', 's'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Concat',
    inputs: [x([2, 3]), y([2, 2]), { name: 'z', shape: [2, 1] }],
    nodes: [n('Concat', ['x', 'y', 'z'], ['out'], { axis: -1 })],
    outputs: ['out'],
  },
  {
    name: 'Concat (run-time sizes)',
    inputs: [x([2, 3]), y([1, 3])],
    nodes: [n('Concat', ['x', 'y'], ['out'], { axis: 0 })],
    outputs: ['out'],
    unknownDims: true,
  },
  {
    name: 'Split (q, k, v of c_attn; one output unused)',
    inputs: [x([2, 3, 6])],
    nodes: [
      constInts('sizes', [2, 2, 2]),
      n('Split', ['x', 'sizes'], ['q', 'k', 'v'], { axis: 2 }),
      n('Mul', ['q', 'k'], ['out']),
    ],
    outputs: ['out'],
  },
  {
    name: 'Slice with negative steps and axes (rotate_half)',
    inputs: [x([2, 3, 8])],
    nodes: [
      constInts('s0', [0]),
      constInts('e0', [4]),
      constInts('s1', [4]),
      constInts('e1', [9999]),
      constInts('ax', [-1]),
      constInts('rs', [-1]),
      constInts('re', [-9999]),
      constInts('step', [-1]),
      n('Slice', ['x', 's0', 'e0', 'ax'], ['lo']),
      n('Slice', ['x', 's1', 'e1', 'ax'], ['hi']),
      n('Neg', ['hi'], ['nhi']),
      n('Concat', ['nhi', 'lo'], ['rot'], { axis: -1 }),
      n('Slice', ['rot', 'rs', 're', 'ax', 'step'], ['out']),
    ],
    outputs: ['out'],
  },
  {
    name: 'Gather with repeated indices (an embedding of activations)',
    inputs: [x([2, 5, 3]), { name: 'i', shape: [4], ints: [0, 3, 3, -1] }],
    nodes: [n('Gather', ['x', 'i'], ['out'], { axis: 1 })],
    outputs: ['out'],
  },
  {
    name: 'Gather scalar index (pooler: first token)',
    inputs: [x([2, 5, 3])],
    nodes: [constInts('i0', [0], true), n('Gather', ['x', 'i0'], ['out'], { axis: 1 })],
    outputs: ['out'],
  },
  {
    name: 'GatherElements',
    inputs: [x([2, 3]), { name: 'i', shape: [2, 2], ints: [0, 2, 1, 1] }],
    nodes: [n('GatherElements', ['x', 'i'], ['out'], { axis: 1 })],
    outputs: ['out'],
  },
  {
    name: 'GatherND',
    inputs: [x([2, 3, 4]), { name: 'i', shape: [2, 2], ints: [0, 1, 1, 2] }],
    nodes: [n('GatherND', ['x', 'i'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Tile',
    inputs: [x([2, 3])],
    nodes: [constInts('r', [2, 2]), n('Tile', ['x', 'r'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'Trilu',
    opset: 17,
    inputs: [x([2, 4, 4])],
    nodes: [n('Trilu', ['x'], ['out'], { upper: 0 })],
    outputs: ['out'],
  },
  {
    name: 'a tensor read twice (residual): contributions add up',
    inputs: [x([2, 3])],
    nodes: [n('Tanh', ['x'], ['t']), n('Mul', ['t', 'x'], ['m']), n('Add', ['m', 'x'], ['out'])],
    outputs: ['out'],
  },
  {
    name: 'attention as GPT-2 exports it (scores, causal bias, softmax, context)',
    inputs: [
      { name: 'q', shape: [1, 2, 3, 4] },
      { name: 'k', shape: [1, 2, 3, 4] },
      { name: 'v', shape: [1, 2, 3, 4] },
      { name: 'bias', shape: [1, 1, 3, 3], active: false },
    ],
    nodes: [
      constFloat('scale', 2, F),
      n('Transpose', ['k'], ['kt'], { perm: [0, 1, 3, 2] }),
      n('MatMul', ['q', 'kt'], ['s']),
      n('Div', ['s', 'scale'], ['sd']),
      n('Add', ['sd', 'bias'], ['sb']),
      n('Softmax', ['sb'], ['p'], { axis: -1 }),
      n('MatMul', ['p', 'v'], ['out']),
    ],
    outputs: ['out'],
  },
];

for (const c of CASES) {
  test(`gradient rule: ${c.name}`, async () => {
    const r = await checkGradient(c);
    assert.ok(r.inputs.length > 0, 'the case has a differentiable input');
    for (const i of r.inputs) {
      assert.ok(
        i.error <= i.tolerance,
        `${c.name} (${r.dtype}): d/d${i.name} analytic ${i.analytic} vs finite difference ${i.numeric} (error ${i.error.toExponential(2)} > ${i.tolerance.toExponential(2)})`,
      );
    }
  });
}
