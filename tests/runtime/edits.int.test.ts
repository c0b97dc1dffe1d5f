// A model variant's edit in the runtime (RunRequest.edit, docs/interleaving.md "Persistent edits"): it runs with every
// invoke's block and in every trace of a session, as the same lines at the top of the block would; with generation
// through m.all it acts at every step; an invoke without a block runs it too; one that throws fails the request naming
// the edit; a malformed one is refused before anything runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { run, sameBits, tinyModel, value } from './tiny-model.js';

const A = [464, 2068, 7586, 21831, 18045, 625, 262];
const B = [40, 1842, 3290];
const EDIT = {
  key: 'gpt2-tiny@scale-h0',
  source: 'async (m) => { m.transformer.h[0].output = (await m.transformer.h[0].output).mul(0.5); }',
};
const INLINE_HEAD = 'm.transformer.h[0].output = (await m.transformer.h[0].output).mul(0.5);';

test('with every invoke of a batch, and in every trace of a session, the edit is the inline lines', async () => {
  const hm = await tinyModel();
  const user = 'async (m) => await m.output';
  const inline = `async (m) => { ${INLINE_HEAD} return await m.output; }`;
  const edited = await run(hm, {
    edit: EDIT,
    invokes: [
      { tokens: A, block: user },
      { tokens: B, block: user },
    ],
  });
  const want = await run(hm, {
    invokes: [
      { tokens: A, block: inline },
      { tokens: B, block: inline },
    ],
  });
  for (const i of [0, 1])
    assert.ok(sameBits(value(edited.invokes[i]!.result) as Tensor, value(want.invokes[i]!.result) as Tensor));
  const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
  const s = await hm.runSession(
    { edit: EDIT, traces: [{ invokes: [{ tokens: A, block: user }] }, { invokes: [{ tokens: B, block: user }] }] },
    open,
  );
  for (const [t, tokens] of [A, B].entries()) {
    const one = await run(hm, { invokes: [{ tokens, block: inline }] });
    assert.ok(
      sameBits(value(s.traces[t]!.invokes[0]!.result) as Tensor, value(one.invokes[0]!.result) as Tensor),
      `trace ${t}`,
    );
  }
});

test('an edit through m.all acts at every generation step; an invoke without a block runs it too', async () => {
  const hm = await tinyModel();
  const everyStep = {
    key: 'gpt2-tiny@zero-h1',
    source:
      'async (m) => { await m.all(async (s) => { s.transformer.h[1].output = (await s.transformer.h[1].output).mul(0); }); }',
  };
  const gen = { maxNewTokens: 3 };
  const edited = await run(hm, { edit: everyStep, generation: gen, invokes: [{ tokens: A }] });
  const inline = await run(hm, {
    generation: gen,
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { await m.all(async (s) => { s.transformer.h[1].output = (await s.transformer.h[1].output).mul(0); }); }',
      },
    ],
  });
  const plain = await run(hm, { generation: gen, invokes: [{ tokens: A }] });
  assert.deepEqual(edited.invokes[0]!.generated, inline.invokes[0]!.generated);
  assert.notDeepEqual(edited.invokes[0]!.generated, plain.invokes[0]!.generated);
});

test('an edit that throws fails the request naming it; a malformed edit is refused before anything runs', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, {
      edit: {
        key: 'gpt2-tiny@broken',
        source: 'async (m) => { await m.transformer.h[0].output; throw new Error("boom"); }',
      },
      invokes: [{ tokens: A, block: 'async (m) => await m.output' }],
    }),
    /edit gpt2-tiny@broken: boom/,
  );
  await assert.rejects(
    run(hm, { edit: { key: 'gpt2-tiny@bad', source: 'm => {' }, invokes: [{ tokens: A }] }),
    (e: { blockError?: { type: string; message: string } }) =>
      e.blockError?.type === 'BlockSyntaxError' && /edit gpt2-tiny@bad/.test(e.blockError.message),
  );
});
