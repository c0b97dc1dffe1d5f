// `ndif.scan` (nnsight's model.scan()): the shapes it gives without running the model are the shapes a real run's
// block reads, module by module, for one prompt and for a padded batch of invokes; bad input is refused.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Fabric, ScanError } from '../../client/sdk/index.js';
import { startInProcessFabric } from './fabric-harness.js';
import type { InProcessFabric } from './fabric-harness.js';

let fab: InProcessFabric;
let ndif: Fabric;
before(async () => {
  fab = await startInProcessFabric();
  ndif = new Fabric({ url: fab.url, progress: false, cacheDir: false });
});
after(async () => {
  ndif.close();
  await fab.close();
});

/** Every module output's shape as a block reads it, at the manifest's output points in forward order. */
const readAllShapes = `async (m, ctx, points) => {
  const out = {};
  for (const path of points) {
    const mod = path === '' ? m : path.split('.').reduce((x, k) => x[k], m);
    out[path] = (await mod.outputs).map((t) => t.shape);
  }
  return out;
}`;

test('scan gives every module the shapes a real run reads, for one prompt and for a padded batch', async () => {
  const manifest = await ndif.manifest('gpt2-tiny');
  for (const input of ['The Eiffel Tower is in', ['Hi', { input: 'A longer prompt than the first one' }]] as const) {
    const scan = await ndif.scan('gpt2-tiny', input as never);
    const points = manifest.order.filter((k) => k.endsWith('output')).map((k) => k.replace(/\.?output$/, ''));
    const ran = (await ndif.trace('gpt2-tiny', input as never, readAllShapes, { params: points })) as unknown;
    const rows = (Array.isArray(input) ? ran : [ran]) as Array<Record<string, number[][]>>;
    const tok = await ndif.tokenizer('gpt2-tiny');
    const longest = Math.max(
      ...(Array.isArray(input) ? input : [input]).map((x) => tok.encode(typeof x === 'string' ? x : x.input).length),
    );
    assert.equal(scan.sequence, longest);
    let compared = 0;
    for (const read of rows)
      for (const [path, shapes] of Object.entries(read)) {
        const want = scan.modules.get(path);
        assert.ok(want, `scan lists ${path || 'the model'}`);
        assert.deepEqual(
          want.outputs.map((t) => t.shape),
          shapes,
          `${path || 'the model'}: scan's shapes are the run's`,
        );
        compared++;
      }
    const listed = points.length * rows.length;
    assert.ok(listed > 20 && compared === listed, `every module output was compared (${compared} of ${listed})`);
  }
  const one = await ndif.scan('gpt2-tiny', 'Hello world');
  assert.deepEqual(one.shape('transformer.h.0'), one.modules.get('transformer.h.0')!.outputs[0]!.shape);
  // Parameters: every one the manifest lists, with the shape and dtype a read of it has.
  const names = ['lm_head.weight', 'transformer.wte.weight', 'transformer.h.0.attn.c_attn.bias'];
  const read = (await ndif.trace(
    'gpt2-tiny',
    'Hello world',
    `async (m) => [await m.lm_head.weight, await m.transformer.wte.weight, await m.transformer.h[0].attn.c_attn.bias].map((t) => ({ shape: t.shape, dtype: t.dtype }))`,
  )) as Array<{ shape: number[]; dtype: string }>;
  for (const [i, n] of names.entries()) assert.deepEqual(one.parameters.get(n), read[i], `scan's ${n} is a read's`);
  assert.ok(one.parameters.size >= 25, `every parameter listed (${one.parameters.size})`);
});

test('scan refuses what a trace would refuse: an unknown module, an empty input, too many tokens', async () => {
  const scan = await ndif.scan('gpt2-tiny', [1, 2, 3]);
  assert.equal(scan.sequence, 3, 'token lists need no tokenizer');
  assert.throws(
    () => scan.shape('transformer.hh.0'),
    (e: unknown) => e instanceof ScanError && /no module/.test(String(e)),
  );
  await assert.rejects(ndif.scan('gpt2-tiny', []), ScanError);
  const manifest = await ndif.manifest('gpt2-tiny');
  await assert.rejects(
    ndif.scan('gpt2-tiny', new Array(manifest.maxPositions + 1).fill(1)),
    (e: unknown) => e instanceof ScanError && /positions/.test(String(e)),
  );
});
