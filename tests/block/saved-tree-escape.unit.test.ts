// A block's own keys that look like the result encoding ($tensor, $number) stay data through the SavedTree and the
// result container, and keys such as __proto__ are plain own keys.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toSavedTree } from '../../gpu-agent/block/api/saved-tree.js';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { decodeResultContainer, encodeResultContainer, materializeTree } from '../../protocol/result-container.js';

const roundTrip = (v: unknown) => {
  const tree = toSavedTree(v);
  const c = decodeResultContainer(encodeResultContainer({ meta: {}, invokes: [tree] }));
  return { tree, back: materializeTree(c.invokes[0]!, (p) => Tensor.fromPayload(p)) };
};

test('{ $tensor: 5 } returned by a block is data, not a tensor reference', () => {
  const { tree, back } = roundTrip({ $tensor: 5 });
  assert.deepEqual(tree.tree, { $$tensor: 5 });
  assert.deepEqual(tree.tensors, []);
  assert.deepEqual(back, { $tensor: 5 });
});

test('$ keys at any depth, in Maps, and next to real tensors round-trip exactly', () => {
  const t = Tensor.from([1, 2, 3]);
  const { back } = roundTrip({
    a: { $number: 'NaN', $$x: [1, { $tensor: 0 }] },
    m: new Map([['$k', 1]]),
    t,
    n: Number.NaN,
  });
  const b = back as { a: unknown; m: unknown; t: Tensor; n: number };
  assert.deepEqual(b.a, { $number: 'NaN', $$x: [1, { $tensor: 0 }] });
  assert.deepEqual(b.m, new Map([['$k', 1]]));
  assert.ok(b.t instanceof Tensor);
  assert.deepEqual([b.t.flat(0), b.t.flat(1), b.t.flat(2)], [1, 2, 3]);
  assert.ok(Number.isNaN(b.n));
});

test('a __proto__ key is an own key of the saved object, not its prototype', () => {
  const v = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as object;
  const { tree, back } = roundTrip(v);
  assert.ok(Object.hasOwn(tree.tree as object, '__proto__'));
  assert.equal(Object.getPrototypeOf(tree.tree), Object.prototype);
  assert.equal(({} as { polluted?: boolean }).polluted, undefined);
  assert.deepEqual(Object.keys(back as object).sort(), ['__proto__', 'a']);
});
