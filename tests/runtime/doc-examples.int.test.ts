// The examples of docs/interleaving.md, run as written: each `<!-- example: name -->` block is a block source, and
// the `<!-- example-result: name -->` block after it what the block returns on the bundled tiny model.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { run, tinyModel } from './tiny-model.js';
import { fenced, readDoc } from './doc-fences.js';

after(async () => (await tinyModel()).close());

test('docs/interleaving.md: per-step blocks with the KV cache (m.all, sequence 1 after step 0, a swap through the cache)', async () => {
  const doc = readDoc('interleaving.md');
  const block = fenced(doc, '<!-- example: generation-steps -->');
  const want = JSON.parse(fenced(doc, '<!-- example-result: generation-steps -->'));
  const hm = await tinyModel();
  const r = await run(hm, { invokes: [{ prompt: 'The Eiffel Tower is in', block }], generation: { maxNewTokens: 4 } });
  assert.deepEqual(r.invokes[0]!.result.tree, want);
  // The swap at step 1 reached steps 2 and 3 through the cache: without it the later logits differ.
  const logits =
    'async (m) => { const out = []; for (let i = 0; i < 4; i++) { const s = m.step(i); const h = await s.transformer.h[0].output; if (i === 1 && ctx_swap) s.transformer.h[0].output = h.mul(0); out.push((await s.output).slice(0, -1).max().item()); } return out; }';
  const a = await run(hm, {
    invokes: [{ prompt: 'The Eiffel Tower is in', block: logits.replace('ctx_swap', 'true') }],
    generation: { maxNewTokens: 4 },
  });
  const b = await run(hm, {
    invokes: [{ prompt: 'The Eiffel Tower is in', block: logits.replace('ctx_swap', 'false') }],
    generation: { maxNewTokens: 4 },
  });
  const [sa, sb] = [a.invokes[0]!.result.tree as number[], b.invokes[0]!.result.tree as number[]];
  assert.equal(sa[0], sb[0]);
  assert.notEqual(sa[2], sb[2]);
  assert.notEqual(sa[3], sb[3]);
});
