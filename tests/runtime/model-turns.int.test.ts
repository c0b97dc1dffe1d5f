// Requests share a hosted model (issue 20, finding 5): a block parked on a promise that never settles, with a long
// timeout, keeps no one from the model — others run to the end meanwhile, with exactly the values they get alone;
// and interleaved requests (a read, a swap, a generation) each get their own results, as when run one at a time.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbsDiff, tinyModel, value } from './tiny-model.js';

after(async () => (await tinyModel()).close());

const READ = 'async (m) => (await m.transformer.h[1].output).slice(0, -1)';
const SWAP = `async (m) => {
  const h = await m.transformer.h[0].output;
  await new Promise((r) => setTimeout(r, 5));
  m.transformer.h[0].output = h.mul(0.5);
  return (await m.output).slice(0, -1);
}`;

test('a block parked on a never-settling promise does not hold the model; the others finish with their solo values', {
  timeout: 120_000,
}, async () => {
  const hm = await tinyModel();
  const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
  const ctl = new AbortController();
  const parked = hm.run(
    {
      requestId: 'parked',
      timeoutMs: 3_600_000,
      signal: ctl.signal,
      invokes: [
        {
          tokens: [464, 412, 733],
          block: 'async (m) => { await m.transformer.h[0].output; await new Promise(() => {}); }',
        },
      ],
    },
    open,
  );
  parked.catch(() => {});
  const solo = async (block: string, tokens: number[]) =>
    value((await hm.run({ invokes: [{ tokens, block }] }, open)).invokes[0]!.result) as Tensor;
  const others = await Promise.all(
    Array.from({ length: 6 }, (_, i) => solo(i % 2 === 0 ? READ : SWAP, [15496, 995, 11 + i])),
  );
  ctl.abort('test over');
  await assert.rejects(parked, /Cancelled/);
  for (let i = 0; i < others.length; i++) {
    const alone = await solo(i % 2 === 0 ? READ : SWAP, [15496, 995, 11 + i]);
    assert.equal(maxAbsDiff(others[i]!, alone), 0, `request ${i}: the same values as alone`);
  }
});
