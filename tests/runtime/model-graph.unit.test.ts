// Module tree, scopes, canonical order and forward order of points, on hand-built graphs and the PyTorch fixture.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeModel, encodeModel } from '../../gpu-agent/runtime/onnx/codec.js';
import type { GraphProto, NodeProto } from '../../gpu-agent/runtime/onnx/types.js';
import { analyzeGraph } from '../../gpu-agent/runtime/graph/model-graph.js';
import { nodeScope, parsePythonStringList } from '../../gpu-agent/runtime/graph/scopes.js';
import { buildAddressTable } from '../../gpu-agent/runtime/graph/addresses.js';
import { planSegment } from '../../gpu-agent/runtime/segments/segment-model.js';
import { fitDim, formatDim, resolveDim } from '../../gpu-agent/runtime/load/dims.js';
import { fixtureDir } from './tiny-model.js';

const node = (name: string, op: string, input: string[], output: string[], scopes?: string[]): NodeProto => ({
  name,
  op_type: op,
  input,
  output,
  ...(scopes
    ? { metadata_props: [{ key: 'pkg.torch.onnx.name_scopes', value: `[${scopes.map((s) => `'${s}'`).join(', ')}]` }] }
    : {}),
});

test('scopes come from torch node names or from name_scopes metadata', () => {
  assert.equal(nodeScope(node('/transformer/h.5/mlp/c_fc/MatMul', 'MatMul', [], [])), 'transformer.h.5.mlp.c_fc');
  assert.equal(nodeScope(node('/Shape', 'Shape', [], [])), '');
  assert.equal(nodeScope(node('Constant_192', 'Constant', [], [])), null);
  assert.equal(
    nodeScope(node('node_x', 'Add', [], [], ['', 'transformer', 'transformer.h.0', 'transformer.h.0.attn', 'add_4'])),
    'transformer.h.0.attn',
  );
  assert.equal(
    nodeScope(node('node_y', 'Shape', [], [], ['_empty_nn_module_stack_from_metadata_hook', 'sym_size_int_2'])),
    '',
  );
  assert.deepEqual(parsePythonStringList(`['', "a.b", 'it\\'s']`), ['', 'a.b', "it's"]);
  assert.equal(parsePythonStringList('not a list'), null);
});

test('module tree: outputs are read outside, inputs come from outside; shape arithmetic and literals are left out', () => {
  const g: GraphProto = {
    input: [{ name: 'x' }],
    output: [{ name: 'y' }],
    initializer: [{ name: 'w', dims: [2], data_type: 1 }],
    node: [
      node('/a/Mul', 'Mul', ['x', 'w'], ['a1']),
      node('/a/Shape', 'Shape', ['a1'], ['a_shape']),
      node('Constant_1', 'Constant', [], ['c']),
      node('/a/inner/Add', 'Add', ['a1', 'c'], ['a2']),
      node('/b.0/Mul', 'Mul', ['a2', 'a1'], ['b1']),
      node('/b.0/Reshape', 'Reshape', ['b1', 'a_shape'], ['b2']),
      node('/b.1/Relu', 'Relu', ['b2'], ['y']),
    ],
  };
  const mg = analyzeGraph(g);
  const a = mg.modules.get('a')!;
  assert.deepEqual(a.outputs, ['a1', 'a2'], 'a1 is read by b.0, a2 too; a_shape is shape arithmetic');
  assert.deepEqual(a.inputs, ['x'], 'weights and literals are not inputs');
  assert.equal(
    mg.scopes[mg.nodes.findIndex((n) => n.name === 'Constant_1')],
    'a.inner',
    'an unscoped constant joins its reader',
  );
  assert.deepEqual(mg.modules.get('a.inner')!.inputs, ['a1']);
  assert.ok(mg.modules.get('b')!.isList);
  assert.deepEqual(mg.modules.get('b')!.children, ['b.0', 'b.1']);
  assert.deepEqual(mg.modules.get('')!.outputs, ['y']);
  const table = buildAddressTable(mg);
  assert.deepEqual(
    table.points.map((p) => p.key).filter((k) => !k.includes('.source.')),
    [
      'input',
      'a.input',
      'a.inner.input',
      'a.inner.output',
      'a.output',
      'b.0.input',
      'b.0.output',
      'b.1.input',
      'b.1.output',
      'output',
    ],
    'forward order: outputs innermost first, then inputs outermost first',
  );
  assert.match(table.unobservable.get('b.output')!, /list of modules/);
  // Operations inside a module (nnsight's .source): each compute node of a module's own, under <module>.source.
  assert.deepEqual(
    table.points.map((p) => p.key).filter((k) => k.includes('.source.')),
    [
      'a.source.mul_0.input',
      'a.source.mul_0.output',
      'a.inner.source.add_0.input',
      'a.inner.source.add_0.output',
      'b.0.source.mul_0.input',
      'b.0.source.mul_0.output',
      'b.1.source.relu_0.input',
      'b.1.source.relu_0.output',
    ],
    'every Mul, Add and Relu of a module is an operation of its own, in forward order; the Shape and Reshape are not',
  );
  assert.deepEqual(mg.modules.get('a.source')!.children, ['a.source.mul_0']);
  assert.deepEqual(mg.modules.get('a.source.mul_0')!.outputs, ['a1']);
  assert.match(
    table.unobservable.get('a.source.output')!,
    /operations inside a: read one of them, e\.g\. a\.source\.mul_0\.output/,
  );
});

test('canonical order keeps a module contiguous even when the file interleaves it', () => {
  const g: GraphProto = {
    input: [{ name: 'x' }],
    output: [{ name: 'z' }],
    node: [
      node('/m/A', 'Relu', ['x'], ['m1']),
      node('/other/B', 'Neg', ['x'], ['o1']),
      node('/m/C', 'Relu', ['m1'], ['m2']),
      node('/Add', 'Add', ['m2', 'o1'], ['z']),
    ],
  };
  const mg = analyzeGraph(g);
  assert.deepEqual(
    mg.nodes.map((n) => n.name),
    ['/m/A', '/m/C', '/other/B', '/Add'],
  );
  assert.ok(mg.modules.get('m')!.contiguous);
  // A module that both feeds and reads an outside node cannot be contiguous: it is dissolved, not reordered.
  const cyc: GraphProto = {
    input: [{ name: 'x' }],
    output: [{ name: 'z' }],
    node: [
      node('/m/A', 'Relu', ['x'], ['m1']),
      node('/o/B', 'Neg', ['m1'], ['o1']),
      node('/m/C', 'Add', ['m1', 'o1'], ['z']),
    ],
  };
  const mc = analyzeGraph(cyc);
  assert.equal(mc.modules.get('m')!.contiguous, false);
  const t = buildAddressTable(mc);
  assert.match(t.unobservable.get('m.input')!, /interleaved/);
  assert.equal(t.byKey.get('o.output')!.cut, 2);
});

test('segment liveness carries every tensor crossing the cut, not only the hidden state', () => {
  const model = decodeModel(readFileSync(join(fixtureDir, 'model.onnx')));
  const mg = analyzeGraph(model.graph!);
  const h1 = mg.modules.get('transformer.h.1')!;
  const before = planSegment(mg, { start: 0, end: h1.start });
  const afterCut = planSegment(mg, { start: h1.start, end: mg.nodes.length });
  assert.ok(before.outputs.includes('/transformer/h.0/Add_1_output_0'), 'the hidden state');
  assert.ok(
    before.outputs.includes('/transformer/Where_1_output_0'),
    'the attention mask built before h.0 and read by h.1',
  );
  assert.deepEqual([...afterCut.inputs].sort(), [...before.outputs].filter((t) => afterCut.inputs.includes(t)).sort());
  for (const t of afterCut.inputs)
    assert.ok(
      before.outputs.includes(t) || mg.graphInputs.some((v) => v.name === t),
      `${t} comes from the first segment or the graph`,
    );
  assert.ok(afterCut.initializers.includes('transformer.h.1.mlp.c_fc.weight'));
  assert.ok(!afterCut.initializers.includes('transformer.h.0.mlp.c_fc.weight'));
});

test('codec: decode keeps raw_data as views into the file, encode round-trips', () => {
  const bytes = readFileSync(join(fixtureDir, 'model.onnx'));
  const m = decodeModel(bytes);
  const w = m.graph!.initializer!.find((t) => t.name === 'transformer.wte.weight')!;
  assert.equal(w.raw_data!.buffer, bytes.buffer, 'a view, not a copy');
  assert.deepEqual(w.dims, [512, 64]);
  const again = decodeModel(encodeModel(m));
  assert.equal(again.graph!.node!.length, m.graph!.node!.length);
  assert.deepEqual(again.graph!.node![200], m.graph!.node![200]);
  assert.deepEqual(again.opset_import, m.opset_import);
  assert.throws(() => decodeModel(new Uint8Array([1, 2, 3, 4, 5])), /not an ONNX ModelProto/);
});

test('symbolic dims: integer fits in batch and sequence', () => {
  const pts = [
    { batch: 1, seq: 2 },
    { batch: 2, seq: 3 },
    { batch: 1, seq: 4 },
    { batch: 3, seq: 2 },
    { batch: 2, seq: 5 },
  ];
  const fit = (f: (b: number, t: number) => number) =>
    fitDim(
      pts,
      pts.map((p) => f(p.batch, p.seq)),
    );
  assert.equal(formatDim(fit((b) => b)!), 'batch');
  assert.equal(formatDim(fit((_, t) => t)!), 'sequence');
  assert.equal(formatDim(fit(() => 768)!), '768');
  assert.equal(formatDim(fit((b) => 12 * b)!), '12*batch');
  assert.equal(formatDim(fit((b, t) => b * t)!), 'batch*sequence');
  assert.equal(resolveDim(fit((b, t) => b * t + 1)!, 4, 10), 41);
  assert.equal(
    fit((_, t) => t * t),
    null,
    'not linear in batch, sequence and their product',
  );
});
