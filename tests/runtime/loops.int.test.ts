// Loops in one session (a repeated trace, `repeat`): thousands of iterations without the client, ctx.shared kept,
// ctx.iteration counting, the latest ctx.report value on throttled progress events; a loop past its time limit ends
// with Timeout naming the iteration reached; a data set taken a batch at a time; the PyTorch-checked training loop
// (tests/fixtures/hf/llama/training.json) run as one repeated trace gives PyTorch's losses.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { InterventionError, RequestError, loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel, TraceEvent } from '../../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { hfDir } from './hf-fixtures.js';
import { inProcess, sameBits, tinyModel, value } from './tiny-model.js';

let llamaP: Promise<HostedModel> | undefined;
const llama = () => (llamaP ??= loadModel(join(hfDir, 'llama', 'torchscript'), { key: 'loops-llama' }));
after(async () => {
  await (await tinyModel()).close();
  if (llamaP) await (await llamaP).close();
});

const A = [464, 2068, 7586, 21831, 18045, 625, 262];

// A steering vector on layer 0 of the tiny model, trained by SGD to bring layer 1's output towards ones (a loss
// through the model's backward, cheap enough for thousands of steps); every iteration counts itself and reports its
// loss; the last returns the vector and the count.
const STEER = `async (m, ctx) => {
  const s = ctx.shared;
  if (!s.v) {
    s.v = ctx.Tensor.zeros([64]).requiresGrad_();
    s.opt = new ctx.optim.SGD([s.v], { lr: 0.05, momentum: 0.9 });
    s.count = 0;
  }
  const h = await m.transformer.h[0].output;
  m.transformer.h[0].output = h.add(s.v);
  const out = (await m.transformer.h[1].output).index(0);
  const loss = out.mseLoss(ctx.Tensor.ones(out.shape));
  s.opt.zeroGrad();
  await loss.backward();
  await s.opt.step();
  s.count++;
  const l = loss.item();
  ctx.report({ loss: l });
  if (s.first === undefined) s.first = l;
  return { v: s.v.detach(), count: s.count, iteration: ctx.iteration, iterations: ctx.iterations, first: s.first, loss: l };
}`;

// Enough iterations for several throttled progress reports (the loop runs for seconds) and a loss that has halved.
const N = 600;

test('a loop of 600 iterations runs in one session, ctx.shared kept, reporting throttled progress', async () => {
  const hm = await tinyModel();
  const events: TraceEvent[] = [];
  const looped = await hm.runSession(
    {
      traces: [{ invokes: [{ tokens: A, block: STEER }], repeat: { times: N } }],
      timeoutMs: 600_000,
      progressIntervalMs: 200,
      onTrace: (e) => events.push(e),
    },
    inProcess(hm),
  );
  assert.equal(looped.traces.length, 1, 'a repeated trace is one trace of the result');
  const r = looped.traces[0]!;
  assert.equal(r.iterations, N);
  assert.equal(r.invokes.length, 1, "the result holds the last iteration's invokes");
  const got = value(r.invokes[0]!.result) as {
    v: Tensor;
    count: number;
    iteration: number;
    iterations: number;
    first: number;
    loss: number;
  };
  assert.equal(got.count, N, 'ctx.shared lasted through every iteration');
  assert.equal(got.iteration, N - 1);
  assert.equal(got.iterations, N);
  assert.ok(got.loss < got.first * 0.5, `the loss falls (${got.first} → ${got.loss})`);

  // Progress: RUNNING first, throttled RUNNING in between (done counting up, the latest report), COMPLETED last.
  assert.deepEqual(events[0], { trace: 0, traces: 1, status: 'RUNNING', iterations: N, done: 0 });
  const last = events.at(-1)!;
  assert.equal(last.status, 'COMPLETED');
  assert.equal(last.done, N);
  assert.deepEqual(last.reported, { iteration: N - 1, value: { loss: got.loss } });
  const middle = events.slice(1, -1);
  assert.ok(middle.length >= 2, `progress between start and end (${events.length} events)`);
  // Throttled: consecutive progress events are at least the interval apart (one per iteration would be N - 1).
  middle.forEach((e, k) => {
    const before = k === 0 ? 0 : middle[k - 1]!.ms!;
    assert.ok(e.ms! - before >= 200, `event ${k} came ${e.ms! - before} ms after the one before it`);
  });
  for (let k = 0; k < middle.length; k++) {
    const e = middle[k]!;
    assert.equal(e.status, 'RUNNING');
    assert.ok(e.done! > (k === 0 ? 0 : middle[k - 1]!.done!) && e.done! < N, 'done counts up');
    assert.equal(e.reported!.iteration, e.done! - 1, 'the report of the iteration just done');
  }
});

test('a loop of 200 iterations ends where 200 separate traces of a session end, bit for bit', async () => {
  const hm = await tinyModel();
  const looped = await hm.runSession(
    { traces: [{ invokes: [{ tokens: A, block: STEER }], repeat: { times: 200 } }], timeoutMs: 600_000 },
    inProcess(hm),
  );
  // The old form: one trace per step (the runtime has no trace cap; over HTTP a session holds at most 64).
  const separate = await hm.runSession(
    { traces: Array.from({ length: 200 }, () => ({ invokes: [{ tokens: A, block: STEER }] })), timeoutMs: 600_000 },
    inProcess(hm),
  );
  const got = value(looped.traces[0]!.invokes[0]!.result) as { v: Tensor; count: number };
  const want = value(separate.traces[199]!.invokes[0]!.result) as { v: Tensor; count: number };
  assert.equal(got.count, 200);
  assert.equal(want.count, 200);
  assert.ok(sameBits(got.v, want.v), 'the loop ends with the same vector, bit for bit');
});

test('a loop past its time limit ends with Timeout naming the trace and the iteration it reached', async () => {
  const hm = await tinyModel();
  const events: TraceEvent[] = [];
  await assert.rejects(
    hm.runSession(
      {
        traces: [
          { invokes: [{ tokens: A }] },
          { invokes: [{ tokens: A, block: STEER }], repeat: { times: 1_000_000 } },
        ],
        timeoutMs: 1500,
        onTrace: (e) => events.push(e),
      },
      inProcess(hm),
    ),
    (e: unknown) => {
      assert.ok(e instanceof InterventionError, String(e));
      assert.equal(e.code, 'REQUEST_TIMEOUT');
      const m = /^Timeout: trace 1 iteration (\d+) of 1000000: /.exec(e.message.replace(/ \(invoke \d+\)/, ''));
      assert.ok(m, e.message);
      assert.equal(e.details?.iteration, Number(m[1]));
      assert.ok(Number(m[1]) > 0, 'it got somewhere first');
      const end = events.at(-1)!;
      assert.equal(end.status, 'ERROR');
      assert.equal(end.done, Number(m[1]), 'the ERROR event says how many iterations were done');
      return true;
    },
  );
});

test('with batch, the invokes are a data set taken batch at a time, wrapping around; ctx.traces holds the last iteration', async () => {
  const hm = await tinyModel();
  const data = [[1], [2], [3], [4], [5]].map((t) => ({ tokens: [...A, ...t] }));
  const block = `async (m, ctx) => { (ctx.shared.seen ??= []).push(ctx.tokens.at(-1)); return { it: ctx.iteration, last: ctx.tokens.at(-1) }; }`;
  const after = `async (m, ctx) => ({ seen: ctx.shared.seen, traces: ctx.traces })`;
  const s = await hm.runSession(
    {
      traces: [
        { invokes: data.map((d) => ({ ...d, block })), repeat: { times: 4, batch: 2 } },
        { invokes: [{ tokens: A, block: after }] },
      ],
    },
    inProcess(hm),
  );
  assert.equal(s.traces[0]!.iterations, 4);
  const got = value(s.traces[1]!.invokes[0]!.result) as { seen: number[]; traces: unknown[][] };
  assert.deepEqual(got.seen, [1, 2, 3, 4, 5, 1, 2, 3]);
  assert.deepEqual(got.traces, [
    [
      { it: 3, last: 2 },
      { it: 3, last: 3 },
    ],
  ]);
});

test('bad repeats are refused before anything runs', async () => {
  const hm = await tinyModel();
  for (const repeat of [{ times: 0 }, { times: 2, batch: 3 }, { times: 1.5 }]) {
    await assert.rejects(
      hm.runSession({ traces: [{ invokes: [{ tokens: A }, { tokens: A }], repeat }] }, inProcess(hm)),
      (e: unknown) =>
        e instanceof RequestError && e.code === 'SESSION_BAD_REPEAT' && /^trace 0: repeat\./.test(e.message),
    );
  }
});

test('ctx.report refuses what it cannot carry, with a TypeError saying what it takes', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    hm.runSession(
      {
        traces: [{ invokes: [{ tokens: A, block: 'async (m, ctx) => { ctx.report("low"); }' }], repeat: { times: 2 } }],
      },
      inProcess(hm),
    ),
    (e: unknown) => e instanceof InterventionError && /ctx\.report: .*finite number/.test(e.message),
  );
});

interface Loop {
  losses: number[];
}
const ref = JSON.parse(readFileSync(join(hfDir, 'llama', 'training.json'), 'utf8')) as {
  prompts: { text: string; ids: number[] }[];
  steering: Loop;
};

test("the PyTorch-checked steering loop as one repeated trace over its prompts (batch 1): every step's loss within 1e-4", async () => {
  const hm = await llama();
  const block = `async (m, ctx) => {
  const s = ctx.shared;
  if (!s.v) {
    s.v = ctx.Tensor.zeros([64]).requiresGrad_();
    s.opt = new ctx.optim.AdamW([s.v], { lr: 0.05, weightDecay: 0.01 });
    s.losses = [];
  }
  const h = await m.model.layers[0].output;
  m.model.layers[0].output = h.add(s.v);
  const logits = (await m.output).index(0);
  const loss = logits.slice([-1, null]).crossEntropy([7]);
  s.opt.zeroGrad();
  await loss.backward();
  await s.opt.step();
  s.losses.push(loss.item());
  ctx.report(loss.item());
  return ctx.iteration === ctx.iterations - 1 ? s.losses : null;
}`;
  const want = ref.steering.losses;
  const s = await hm.runSession(
    {
      traces: [
        { invokes: ref.prompts.map((p) => ({ prompt: p.text, block })), repeat: { times: want.length, batch: 1 } },
      ],
    },
    () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
  );
  const got = value(s.traces[0]!.invokes[0]!.result) as number[];
  assert.equal(got.length, want.length);
  got.forEach((l, k) => {
    assert.ok(Math.abs(l - want[k]!) <= 1e-4, `step ${k}: loss ${l}, PyTorch ${want[k]} (all: ${got.join(', ')})`);
  });
  assert.ok(got.at(-1)! < got[0]!);
});
