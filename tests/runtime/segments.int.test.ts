// A forward pass cut into segments (because blocks read module values along the way) gives logits bit-identical
// to the whole graph in one session.run, for several cut sets, on the generated model and on both PyTorch exports.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import { fixtureDir, run, sameBits, tensor, tinyModel } from './tiny-model.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { PROMOTE_AFTER } from '../../gpu-agent/runtime/interleave/forward-pass.js';

const readAll = (points: string[]) =>
  `async (m) => { ${points.map((p) => `await m.${p};`).join(' ')} return await m.output; }`;

async function checkCuts(hm: HostedModel, prompt: { tokens: number[] }[], cutSets: string[][]): Promise<void> {
  const whole = await run(hm, { invokes: prompt.map((p) => ({ ...p, block: 'async (m) => await m.output' })) });
  assert.equal(whole.timings.segmentRuns, 1, 'a request that only reads the model output runs the whole graph once');
  for (const points of cutSets) {
    const cut = await run(hm, { invokes: prompt.map((p) => ({ ...p, block: readAll(points) })) });
    assert.ok(cut.timings.segmentRuns > 1, `reading ${points.join(', ')} cuts the pass`);
    prompt.forEach((_, i) => {
      assert.ok(
        sameBits(tensor(whole.invokes[i]!.result), tensor(cut.invokes[i]!.result)),
        `invoke ${i}: logits bit-identical with cuts at ${points.join(', ')}`,
      );
    });
  }
}

const tokens = [{ tokens: [464, 2068, 7586, 21831, 18045, 625, 262] }, { tokens: [40, 1842, 3290] }];

test('generated model: segmented runs equal the whole-graph run bit for bit', async () => {
  const hm = await tinyModel();
  const everyOutput = hm
    .manifest()
    .order.filter((k) => k.endsWith('.output') && k !== 'output')
    .map((k) => k.replace(/\.(\d+)\./g, '[$1].').replace(/\.(\d+)$/, '[$1]'));
  await checkCuts(hm, tokens, [
    ['transformer.h[0].output'],
    ['transformer.h[0].attn.output', 'transformer.h[1].mlp.act.output'],
    ['transformer.wte.output', 'transformer.h[1].input', 'transformer.ln_f.input'],
    everyOutput,
  ]);
});

let fixtures: HostedModel[] = [];
const tempDirs: string[] = [];
after(async () => {
  await Promise.all(fixtures.map((f) => f.close()));
  await (await tinyModel()).close();
  const { rmSync } = await import('node:fs');
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

test('PyTorch exports (TorchScript and dynamo): segmented runs equal the whole-graph run bit for bit', async () => {
  const ts = await loadModel(fixtureDir, { key: 'gpt2-reference' });
  const dynamo = await loadModelFile('model-dynamo.onnx');
  fixtures = [ts, dynamo];
  const small = [{ tokens: [1, 2, 3, 4, 5, 6] }];
  for (const hm of fixtures) {
    await checkCuts(hm, small, [
      ['transformer.h[0].mlp.output'],
      ['transformer.h[0].output', 'transformer.h[1].attn.output', 'transformer.ln_f.output'],
    ]);
  }
});

/** The fixture directory holds a second export under another file name; serve it from a temp dir. */
async function loadModelFile(file: string): Promise<HostedModel> {
  const { mkdtempSync, symlinkSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'ndif-dynamo-'));
  tempDirs.push(dir);
  symlinkSync(join(fixtureDir, file), join(dir, 'model.onnx'));
  symlinkSync(join(fixtureDir, 'config.json'), join(dir, 'config.json'));
  return loadModel(dir, { key: 'gpt2-reference-dynamo' });
}

test('a stretch across several layers runs as layer pieces, and as one segment once it came back PROMOTE_AFTER times and fits in the segment cache', async () => {
  const dir = ensureModel('gpt2-mini');
  const roomy = await loadModel(dir, { key: 'mini-roomy' });
  const tight = await loadModel(dir, { key: 'mini-tight', segmentCacheBytes: 1 });
  fixtures.push(roomy, tight);
  const req = { invokes: [{ tokens: tokens[0]!.tokens, block: readAll(['transformer.h[0].output']) }] };
  const whole = await run(roomy, { invokes: [{ tokens: tokens[0]!.tokens, block: 'async (m) => await m.output' }] });
  const runs: number[] = [];
  for (let i = 0; i <= PROMOTE_AFTER + 1; i++) {
    const r = await run(roomy, req);
    runs.push(r.timings.segmentRuns);
    assert.ok(
      sameBits(tensor(whole.invokes[0]!.result), tensor(r.invokes[0]!.result)),
      `run ${i}: bit-identical to the whole graph`,
    );
  }
  assert.ok(
    runs.slice(0, PROMOTE_AFTER).every((n) => n >= 4),
    `the first ${PROMOTE_AFTER} run the layer pieces: ${runs}`,
  );
  assert.deepEqual(runs.slice(PROMOTE_AFTER), [2, 2], 'then up to the read, and the rest of the pass in one run');
  for (let i = 0; i <= PROMOTE_AFTER + 1; i++) {
    const r = await run(tight, req);
    assert.ok(r.timings.segmentRuns >= 4, 'a stretch that does not fit in the cache stays in pieces');
    if (i === PROMOTE_AFTER + 1) assert.ok(sameBits(tensor(whole.invokes[0]!.result), tensor(r.invokes[0]!.result)));
  }
});

test('the steps of a generation run a stretch across several layers as one segment from the first step (compiled once, not pieces then whole)', async () => {
  const hm = await loadModel(ensureModel('gpt2-mini'), { key: 'mini-generation' });
  fixtures.push(hm);
  const before = hm.segmentStats().compiled;
  const r = await run(hm, {
    invokes: [
      {
        tokens: tokens[0]!.tokens,
        block: 'async (m) => { await m.all(async (s) => { await s.transformer.h[0].output; }); }',
      },
    ],
    generation: { maxNewTokens: 6, ignoreEos: true },
  });
  assert.equal(r.steps, 6);
  assert.equal(r.timings.segmentRuns, 2 * r.steps, 'each step: up to the read, then the rest of the pass in one run');
  assert.equal(hm.segmentStats().compiled - before, 2, 'the two segments of the cut, and nothing else');
});

test('a stretch that comes back is compiled when the pieces only it runs make room for it, and they are evicted', async () => {
  const dir = ensureModel('gpt2-mini');
  const req = { invokes: [{ tokens: tokens[0]!.tokens, block: readAll(['transformer.h[1].attn.output']) }] };
  const probe = await loadModel(dir, { key: 'mini-probe' });
  fixtures.push(probe);
  const pinned = probe.segmentStats().cachedBytes;
  await run(probe, req);
  const pieces = probe.segmentStats().cachedBytes - pinned;
  // Room for the pieces, not for the pieces and the stretches as well.
  const budget = Math.ceil(pieces * 1.2);
  const hm = await loadModel(dir, { key: 'mini-room', segmentCacheBytes: budget });
  fixtures.push(hm);
  const whole = await run(hm, { invokes: [{ tokens: tokens[0]!.tokens, block: 'async (m) => await m.output' }] });
  const runs: number[] = [];
  for (let i = 0; i <= PROMOTE_AFTER + 1; i++) {
    const r = await run(hm, req);
    runs.push(r.timings.segmentRuns);
    assert.ok(sameBits(tensor(whole.invokes[0]!.result), tensor(r.invokes[0]!.result)), `run ${i}: bit-identical`);
  }
  assert.ok(runs[0]! > 2, `pieces first: ${runs}`);
  assert.deepEqual(runs.slice(PROMOTE_AFTER), [2, 2], 'then each stretch as one segment');
  const stats = hm.segmentStats();
  assert.ok(stats.evicted > 0, 'the pieces were evicted');
  assert.ok(stats.cachedBytes - pinned <= budget, `the cache keeps to its budget: ${stats.cachedBytes - pinned}`);
});

test('a piece another cut set runs too neither makes room for a stretch nor is evicted for it', async () => {
  const dir = ensureModel('gpt2-mini');
  const a = { invokes: [{ tokens: tokens[0]!.tokens, block: readAll(['transformer.h[0].attn.output']) }] };
  const b = { invokes: [{ tokens: tokens[0]!.tokens, block: readAll(['transformer.h[1].attn.output']) }] };
  const probe = await loadModel(dir, { key: 'mini-probe-shared' });
  fixtures.push(probe);
  const pinned = probe.segmentStats().cachedBytes;
  await run(probe, a);
  await run(probe, b);
  const pieces = probe.segmentStats().cachedBytes - pinned;
  // Room for both cut sets' pieces, not for a stretch on top unless pieces only it runs go.
  const hm = await loadModel(dir, { key: 'mini-shared', segmentCacheBytes: Math.ceil(pieces * 1.2) });
  fixtures.push(hm);
  const whole = await run(hm, { invokes: [{ tokens: tokens[0]!.tokens, block: 'async (m) => await m.output' }] });
  for (let i = 0; i <= PROMOTE_AFTER + 2; i++) {
    for (const req of [a, b]) {
      const r = await run(hm, req);
      assert.ok(sameBits(tensor(whole.invokes[0]!.result), tensor(r.invokes[0]!.result)), `round ${i}: bit-identical`);
    }
  }
  const stats = hm.segmentStats();
  assert.equal(stats.recompiled, 0, `no segment was evicted and compiled again: ${JSON.stringify(stats)}`);
  assert.ok(stats.cachedBytes - pinned <= Math.ceil(pieces * 1.2), 'the cache keeps to its budget');
});
