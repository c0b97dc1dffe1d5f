// Generation on the bundled tiny model (with-past layout): the KV cache gives exactly the uncached tokens, sampling
// is deterministic per seed (on two loads of the model, as on two agents) and differs across seeds, rows stop at
// EOS / stop tokens / stop strings / their own maxNewTokens while the others go on, blocks follow steps with
// m.iter / m.all and see ctx.finished, tokens stream through onToken, and bad options are refused before anything
// runs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { loadModel, RequestError, InterventionError } from '../../gpu-agent/runtime/index.js';
import type { HostedModel, RunRequest, TokenEvent } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { fixtureDir, maxAbsDiff, run, tinyModel, value } from './tiny-model.js';

const EOS = 50256;
const A = [464, 412, 733, 417, 8765, 318, 287];
const B = [15496, 995, 11];
const C = [40, 1101, 257, 1310, 6];

let second: HostedModel | undefined;
after(async () => {
  await (await tinyModel()).close();
  await second?.close();
});

const logitsPerStep =
  'async (m) => { const out = []; for (let i = 0; i < m.steps; i++) out.push((await m.step(i).output).slice(0, -1)); return out; }';

test('cached greedy generation gives exactly the uncached tokens (a padded batch of three), logits within 1e-4', async () => {
  const hm = await tinyModel();
  const req = (cache: boolean): RunRequest => ({
    generation: { maxNewTokens: 20, cache, ignoreEos: true },
    invokes: [A, B, C].map((tokens) => ({ tokens, block: logitsPerStep })),
  });
  const cached = await run(hm, req(true));
  const uncached = await run(hm, req(false));
  assert.equal(cached.cache, 'past');
  assert.equal(uncached.cache, 'none');
  assert.equal(cached.steps, 20);
  for (let i = 0; i < 3; i++) {
    assert.equal(cached.invokes[i]!.generated.length, 20);
    assert.deepEqual(cached.invokes[i]!.generated, uncached.invokes[i]!.generated, `invoke ${i}: the same tokens`);
    const a = value(cached.invokes[i]!.result) as Tensor[];
    const b = value(uncached.invokes[i]!.result) as Tensor[];
    a.forEach((t, k) => {
      assert.ok(maxAbsDiff(t, b[k]!) <= 1e-4, `invoke ${i} step ${k}: ${maxAbsDiff(t, b[k]!)}`);
    });
    assert.deepEqual(cached.invokes[i]!.finish, { reason: 'length', step: 19 });
  }
  assert.ok(
    cached.timings.forwardMs < uncached.timings.forwardMs,
    `the cache saves time (${cached.timings.forwardMs.toFixed(1)} vs ${uncached.timings.forwardMs.toFixed(1)} ms)`,
  );
});

test('sampling is deterministic per seed (also on a second load of the model) and differs across seeds', async () => {
  const hm = await tinyModel();
  second = await loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny-2' });
  const sample = async (model: HostedModel, generation: RunRequest['generation']) =>
    (
      await run(model, {
        generation: { maxNewTokens: 12, ignoreEos: true, ...generation },
        invokes: [{ tokens: A }, { tokens: B }],
      })
    ).invokes;
  const s1 = await sample(hm, { temperature: 1, seed: 7 });
  const s1again = await sample(second, { temperature: 1, seed: 7 });
  const s2 = await sample(hm, { temperature: 1, seed: 8 });
  assert.deepEqual(
    s1.map((i) => i.generated),
    s1again.map((i) => i.generated),
    'same seed, same tokens',
  );
  assert.notDeepEqual(s1[0]!.generated, s2[0]!.generated, 'another seed, other tokens');
  assert.notDeepEqual(s1[0]!.generated, s1[1]!.generated, 'the rows of one request draw from their own streams');
  assert.equal(s1[0]!.seed, 7, 'invoke 0 uses the request seed as is');
  assert.ok(Number.isSafeInteger(s1[1]!.seed) && s1[1]!.seed !== 7, 'invoke 1 a seed derived from it');
  // A seed an invoke reports reproduces it alone.
  const alone = await run(hm, {
    generation: { maxNewTokens: 12, ignoreEos: true, temperature: 1 },
    invokes: [{ tokens: B, generation: { seed: s1[1]!.seed! } }],
  });
  assert.deepEqual(alone.invokes[0]!.generated, s1[1]!.generated);
  // Without a seed one is drawn and reported.
  const drawn = await sample(hm, { temperature: 0.8, topK: 50 });
  const redo = await sample(hm, { temperature: 0.8, topK: 50, seed: drawn[0]!.seed! });
  assert.deepEqual(redo[0]!.generated, drawn[0]!.generated);
  // Greedy reports no seed; top-k 1 and a tiny top-p are greedy.
  const greedy = await sample(hm, {});
  assert.equal(greedy[0]!.seed, undefined);
  assert.deepEqual((await sample(hm, { temperature: 1.5, topK: 1, seed: 3 }))[0]!.generated, greedy[0]!.generated);
  assert.deepEqual((await sample(hm, { temperature: 1.5, topP: 1e-9, seed: 3 }))[0]!.generated, greedy[0]!.generated);
});

test('repetition penalty: a strong one keeps greedy decoding from repeating a token', async () => {
  const hm = await tinyModel();
  const plain = (await run(hm, { generation: { maxNewTokens: 10, ignoreEos: true }, invokes: [{ tokens: B }] }))
    .invokes[0]!.generated;
  assert.ok(new Set(plain).size < plain.length, `the tiny model repeats itself greedily: ${plain}`);
  const penalised = (
    await run(hm, {
      generation: { maxNewTokens: 10, ignoreEos: true, repetitionPenalty: 1e6 },
      invokes: [{ tokens: B }],
    })
  ).invokes[0]!.generated;
  assert.equal(new Set([...B, ...penalised]).size, B.length + penalised.length, `no token repeats: ${penalised}`);
});

test('EOS stops a row (made the argmax by a swap of the logits); the other rows go on; the block sees ctx.finished and m.all ends', async () => {
  const hm = await tinyModel();
  const eosAt2 = `async (m, ctx) => {
    const seen = await m.all(async (s, i) => {
      const logits = await s.output;
      if (i === 2) { const l = logits.clone(); l.setSlice([0, -1, ${EOS}], 1e4); s.output = l; }
      return { step: i, generated: ctx.generated.length, finished: ctx.finished };
    });
    return { seen, finished: ctx.finished, generated: ctx.generated };
  }`;
  const steps =
    'async (m, ctx) => { const seen = await m.all(async (s, i) => (await s.output).shape[1]); return { seen, finished: ctx.finished }; }';
  const r = await run(hm, {
    generation: { maxNewTokens: 6 },
    invokes: [
      { tokens: A, block: eosAt2 },
      { tokens: B, block: steps },
    ],
  });
  const eosRow = r.invokes[0]!;
  assert.deepEqual(eosRow.finish, { reason: 'eos', step: 2, match: EOS });
  assert.equal(eosRow.generated.length, 3);
  assert.equal(eosRow.generated[2], EOS, 'the EOS token is kept');
  const got = eosRow.result.tree as {
    seen: Array<{ step: number; generated: number; finished: boolean }>;
    finished: boolean;
    generated: number[];
  };
  assert.deepEqual(
    got.seen.map((x) => x.step),
    [0, 1, 2],
    'm.all ran steps 0 to 2 only',
  );
  assert.deepEqual(
    got.seen.map((x) => x.generated),
    [0, 1, 2],
    'ctx.generated grows by one per step',
  );
  assert.ok(
    got.seen.every((x) => !x.finished),
    'ctx.finished is false in every step that runs for the row',
  );
  assert.equal(got.finished, true, 'after m.all: the row has finished');
  assert.deepEqual(got.generated, eosRow.generated, 'ctx.generated: the tokens of every step');
  assert.equal(r.steps, 6, 'the other row goes on to its maxNewTokens');
  assert.equal(r.invokes[1]!.generated.length, 6);
  assert.deepEqual(r.invokes[1]!.finish, { reason: 'length', step: 5 });
  assert.deepEqual((r.invokes[1]!.result.tree as { seen: number[] }).seen, [7, 1, 1, 1, 1, 1]);
  // Asked for a step after its row finished: NotProvided, saying why.
  const late = await run(hm, {
    generation: { maxNewTokens: 6 },
    invokes: [
      {
        tokens: A,
        block: `async (m) => { const l = (await m.output).clone(); l.setSlice([0, -1, ${EOS}], 1e4); m.output = l; try { await m.step(3).output; } catch (e) { return e.message; } }`,
      },
      { tokens: B },
    ],
  });
  assert.match(
    late.invokes[0]!.result.tree as string,
    /invoke 0 finished at step 0 \(its EOS token 50256\), so it has no step 3/,
  );
});

test('when every row finished, generation ends early; stop token ids, stop strings and per-invoke maxNewTokens end rows', async () => {
  const hm = await tinyModel();
  const greedy = (await run(hm, { generation: { maxNewTokens: 4, ignoreEos: true }, invokes: [{ tokens: C }] }))
    .invokes[0]!.generated;
  const last = greedy[3]!;
  const first = greedy.indexOf(last);
  const text = hm.tokenizer!.decode([last]);
  const r = await run(hm, {
    generation: { maxNewTokens: 8, ignoreEos: true },
    invokes: [
      { tokens: C, generation: { stopTokenIds: [last] } },
      { tokens: C, generation: { stop: [text] } },
      { tokens: C, generation: { maxNewTokens: 2 } },
      {
        tokens: C,
        block: 'async (m) => { try { await m.step(7).output; } catch (e) { return e.message; } }',
        generation: { maxNewTokens: 3 },
      },
    ],
  });
  assert.deepEqual(r.invokes[0]!.finish, { reason: 'stop-token', step: first, match: last });
  assert.deepEqual(r.invokes[0]!.generated, greedy.slice(0, first + 1), 'the stop token is kept');
  assert.equal(r.invokes[1]!.finish!.reason, 'stop-string');
  assert.equal(r.invokes[1]!.finish!.match, text);
  assert.ok(r.invokes[1]!.finish!.step <= first);
  assert.deepEqual(r.invokes[2]!.finish, { reason: 'length', step: 1 });
  assert.deepEqual(r.invokes[3]!.finish, { reason: 'length', step: 2 });
  assert.equal(r.steps, Math.max(3, first + 1), 'every row had finished after step 2');
  assert.equal(r.stoppedEarly, false);
  assert.match(r.invokes[3]!.result.tree as string, /finished at step 2/);
});

test('m.iter: a range of steps, one step, and the results per step', async () => {
  const hm = await tinyModel();
  const block = `async (m) => ({
    some: await m.iter([1, 3], async (s, i) => [i, (await s.transformer.h[0].output).shape]),
    one: await m.iter(4, async (s, i) => i),
    rest: await m.iter([5, null], async (s, i) => i),
  })`;
  const r = await run(hm, { generation: { maxNewTokens: 7, ignoreEos: true }, invokes: [{ tokens: B, block }] });
  assert.deepEqual(r.invokes[0]!.result.tree, {
    some: [
      [1, [1, 1, 64]],
      [2, [1, 1, 64]],
    ],
    one: [4],
    rest: [5, 6],
  });
  await assert.rejects(
    run(hm, {
      generation: { maxNewTokens: 2 },
      invokes: [{ tokens: B, block: 'async (m) => m.iter("all", async () => 1)' }],
    }),
    (e: unknown) => e instanceof InterventionError && /range must be a step number, \[start, end\]/.test(e.message),
  );
});

test('tokens stream through onToken as they are chosen: every token once, in step order', async () => {
  const hm = await tinyModel();
  const seen: TokenEvent[] = [];
  const r = await run(hm, {
    generation: { maxNewTokens: 5, ignoreEos: true },
    onToken: (t) => seen.push(t),
    invokes: [{ tokens: A }, { tokens: B, generation: { maxNewTokens: 3 } }],
  });
  assert.deepEqual(
    seen.filter((t) => t.invoke === 0).map((t) => t.token),
    r.invokes[0]!.generated,
  );
  assert.deepEqual(
    seen.filter((t) => t.invoke === 1).map((t) => t.token),
    r.invokes[1]!.generated,
  );
  assert.deepEqual(
    seen.map((t) => t.step),
    [0, 0, 1, 1, 2, 2, 3, 4],
  );
  assert.deepEqual(seen[5]!.finish, { reason: 'length', step: 2 });
});

test('with the cache a module holding keys and values cannot be skipped before the last step; without it, it can', async () => {
  const hm = await tinyModel();
  const skip = 'async (m, ctx) => { m.transformer.h[0].skip(ctx.Tensor.zeros([1, 3, 64])); return 1; }';
  await assert.rejects(
    run(hm, { generation: { maxNewTokens: 3 }, invokes: [{ tokens: B, block: skip }] }),
    (e: unknown) =>
      e instanceof InterventionError && e.code === 'BLOCK_NOT_SKIPPABLE' && /KV cache.*cache false/.test(e.message),
  );
  const r = await run(hm, {
    generation: { maxNewTokens: 3, cache: false, ignoreEos: true },
    invokes: [{ tokens: B, block: skip }],
  });
  assert.equal(r.invokes[0]!.generated.length, 3);
});

test('bad generation options are refused with a code before anything runs', async () => {
  const hm = await tinyModel();
  let opened = 0;
  const open = () => {
    opened++;
    throw new Error('must not open');
  };
  const refused = async (req: Partial<RunRequest>, code: string, message: RegExp) => {
    await assert.rejects(hm.run({ invokes: [{ tokens: B }], ...req }, open), (e: unknown) => {
      assert.ok(e instanceof RequestError, `${code}: ${String(e)}`);
      assert.equal(e.code, code);
      assert.match(e.message, message);
      return true;
    });
  };
  await refused(
    { generation: { maxNewTokens: 127 }, invokes: [{ tokens: B }] },
    'GENERATION_TOO_LONG',
    /3 prompt tokens \+ 126 generated tokens fed back need 129 positions; model gpt2-tiny has 128\. Generate at most 126 tokens/,
  );
  await refused(
    { generation: { maxNewTokens: 4, topP: 0 } },
    'GENERATION_BAD_TOP_P',
    /topP must be in \(0, 1\], got 0/,
  );
  await refused({ generation: { maxNewTokens: 4, topP: 1.5 } }, 'GENERATION_BAD_TOP_P', /got 1\.5/);
  await refused(
    { generation: { maxNewTokens: 4, temperature: -0.5 } },
    'GENERATION_BAD_TEMPERATURE',
    /temperature must be a finite number >= 0/,
  );
  await refused(
    { generation: { maxNewTokens: 4, stop: ['\n', ''] } },
    'GENERATION_EMPTY_STOP',
    /stop string 1 is empty/,
  );
  await refused(
    { invokes: [{ tokens: B, generation: { stop: [''] } }], generation: { maxNewTokens: 4 } },
    'GENERATION_EMPTY_STOP',
    /invoke 0 generation: stop string 0 is empty/,
  );
  await refused({ generation: { maxNewTokens: 4, topK: 0 } }, 'GENERATION_BAD_OPTION', /topK must be an integer >= 1/);
  await refused(
    { generation: { maxNewTokens: 4, seed: -1 } },
    'GENERATION_BAD_OPTION',
    /seed must be a non-negative integer/,
  );
  await refused(
    { generation: { maxNewTokens: 4, stopTokenIds: [50257] } },
    'GENERATION_BAD_OPTION',
    /stop token id 50257 is not in model gpt2-tiny's vocabulary/,
  );
  await refused(
    { invokes: [{ tokens: B, generation: { cache: false } }], generation: { maxNewTokens: 4 } },
    'GENERATION_BAD_OPTION',
    /cache is an option of the whole request/,
  );
  await refused(
    { invokes: [{ tokens: B, generation: { maxNewTokens: 9 } }], generation: { maxNewTokens: 4 } },
    'GENERATION_BAD_OPTION',
    /maxNewTokens 9 is more than the request's 4/,
  );
  await refused(
    { newTokens: 3, generation: { maxNewTokens: 4 } },
    'GENERATION_BAD_OPTION',
    /newTokens 3 and maxNewTokens 4 disagree/,
  );
  await refused(
    { generation: { maxNewTokens: 4, temprature: 1 } as never },
    'GENERATION_BAD_OPTION',
    /unknown option "temprature"/,
  );
  assert.equal(opened, 0, 'no channel was opened: nothing ran');
  const ok = await run(hm, { generation: { maxNewTokens: 2 }, invokes: [{ tokens: B }] });
  assert.equal(ok.steps, 2, 'the model still serves');
});

test('an export that numbers positions itself is served without the cache, saying why, and still generates', async () => {
  const hm = await loadModel(fixtureDir, { key: 'gpt2-reference' });
  try {
    const g = hm.manifest().generation!;
    assert.equal(g.cache, 'none');
    assert.match(g.cacheReason!, /no position_ids input: it numbers positions itself/);
    const prompt = [46, 104, 31];
    const r = await run(hm, {
      generation: { maxNewTokens: 3, ignoreEos: true },
      invokes: [{ tokens: prompt, block: 'async (m) => (await m.step(2).output).shape' }],
    });
    assert.equal(r.cache, 'none');
    assert.deepEqual(r.invokes[0]!.result.tree, [1, 5, hm.manifest().vocabSize], 'each step runs the whole sequence');
    const seq = [...prompt];
    for (let i = 0; i < 3; i++) {
      const one = await run(hm, {
        invokes: [{ tokens: seq, block: 'async (m) => (await m.output).slice(0, -1).argmax().item()' }],
      });
      seq.push(one.invokes[0]!.result.tree as number);
    }
    assert.deepEqual(r.invokes[0]!.generated, seq.slice(3));
  } finally {
    await hm.close();
  }
});
