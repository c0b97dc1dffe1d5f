// Batching across requests (serving/batcher.ts) on the bundled tiny model: requests submitted while the model is busy
// (here: in one tick, before the batch is granted its turn) run as one forward pass — the same `batch.id`, one set of
// segment runs — each with exactly the bits it gets alone; a swap in one never reaches another; a failure, timeout,
// cancel or protocol breach in one fails only that one; incompatible requests run apart.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import type { BlockChannel } from '../../protocol/interleave.js';
import type { RunRequest, RunResult } from '../../gpu-agent/runtime/index.js';
import { inProcess, run, sameBits, tinyModel, value } from './tiny-model.js';

after(async () => (await tinyModel()).close());

const tokens = (k: number) => Array.from({ length: 8 }, (_, i) => (i * 7 + k * 13) % 1000);
const READ = 'async (m) => ({ h: await m.transformer.h[1].output, logits: await m.output })';
const SWAP =
  'async (m) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = h.zerosLike(); return { h: await m.transformer.h[1].output, logits: await m.output }; }';

function read(r: RunResult, invoke = 0): { h: Tensor; logits: Tensor } {
  return value(r.invokes[invoke]!.result) as { h: Tensor; logits: Tensor };
}

function sameRead(a: RunResult, b: RunResult, invoke = 0): boolean {
  const x = read(a, invoke);
  const y = read(b, invoke);
  return sameBits(x.h, y.h) && sameBits(x.logits, y.logits);
}

test('requests submitted together run as one forward pass, each with the bits it gets alone; a swap stays in its request', async () => {
  const hm = await tinyModel();
  const reqs: RunRequest[] = [
    { invokes: [{ tokens: tokens(1), block: READ }] },
    { invokes: [{ tokens: tokens(2), block: SWAP }] },
    {
      invokes: [
        { tokens: tokens(3), block: READ },
        { tokens: tokens(4), block: READ },
      ],
    },
  ];
  const alone: RunResult[] = [];
  for (const r of reqs) alone.push(await run(hm, r));
  for (const a of alone) assert.equal(a.batch?.requests, 1, 'one after the other: each alone');
  const together = await Promise.all(reqs.map((r) => run(hm, r)));
  const ids = new Set(together.map((r) => r.batch?.id));
  assert.equal(ids.size, 1, 'one batch');
  assert.deepEqual(together[0]!.batch && { ...together[0]!.batch, id: 0 }, { id: 0, requests: 3, rows: 4 });
  // One forward pass: the segment runs of the request with the most cuts alone (the swap), not the sum of three.
  assert.equal(together[0]!.timings.segmentRuns, alone[1]!.timings.segmentRuns);
  assert.ok(sameRead(together[0]!, alone[0]!), 'the reader next to a swap: bit for bit alone');
  assert.ok(sameRead(together[1]!, alone[1]!), 'the swap: bit for bit alone');
  assert.ok(sameRead(together[2]!, alone[2]!, 0) && sameRead(together[2]!, alone[2]!, 1), 'two invokes: their rows');
  // The swap did change its own request's values (the absent case of the isolation above).
  assert.equal(
    sameBits(read(together[1]!).h, read(await run(hm, { invokes: [{ tokens: tokens(2), block: READ }] })).h),
    false,
  );
  assert.deepEqual(together[2]!.invokes[1]!.tokens, tokens(4));
});

test('a block that throws, one that times out and one cancelled fail alone; the others complete with their solo bits', async () => {
  const hm = await tinyModel();
  const alone = await run(hm, { invokes: [{ tokens: tokens(1), block: READ }] });
  const ctl = new AbortController();
  const slow = 'async (m) => { await m.transformer.h[0].output; await new Promise((r) => setTimeout(r, 5000)); }';
  const runs = [
    run(hm, {
      invokes: [
        { tokens: tokens(5), block: 'async (m) => { await m.transformer.h[0].output; throw new Error("boom"); }' },
      ],
    }),
    run(hm, { invokes: [{ tokens: tokens(1), block: READ }] }),
    run(hm, { invokes: [{ tokens: tokens(6), block: slow }], timeoutMs: 300 }),
    run(hm, { invokes: [{ tokens: tokens(7), block: slow }], signal: ctl.signal }),
    run(hm, { invokes: [{ tokens: tokens(2), block: SWAP }] }),
  ];
  setTimeout(() => ctl.abort('changed my mind'), 100);
  const [boom, ok, timedOut, cancelled, swapped] = await Promise.allSettled(runs);
  assert.equal(boom.status, 'rejected');
  assert.match(String((boom as PromiseRejectedResult).reason.message), /BlockError \(invoke 0\): Error: boom/);
  assert.equal(timedOut.status, 'rejected');
  assert.match(String((timedOut as PromiseRejectedResult).reason.message), /^Timeout: .*within 300 ms/);
  assert.equal(cancelled.status, 'rejected');
  assert.match(String((cancelled as PromiseRejectedResult).reason.message), /^Cancelled: .*changed my mind/);
  assert.equal(ok.status, 'fulfilled');
  assert.equal(swapped.status, 'fulfilled');
  const good = (ok as PromiseFulfilledResult<RunResult>).value;
  assert.equal(good.batch?.requests, 5, 'all five started in one batch');
  assert.equal((swapped as PromiseFulfilledResult<RunResult>).value.batch?.id, good.batch?.id);
  assert.ok(sameRead(good, alone));
});

test('a request whose blocks break the protocol fails alone, with the message it gets alone', async () => {
  const hm = await tinyModel();
  const open = inProcess(hm);
  // A runner that claims an invoke its request does not have.
  const hostile = () => {
    const c = createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
    let first = true;
    const wrapped: BlockChannel = {
      send: (m) => c.send(m),
      receive: async () => {
        if (first) {
          first = false;
          return { kind: 'WAIT', invoke: 7, addr: 'transformer.h.0.output.0' };
        }
        return c.receive();
      },
      close: () => c.close(),
    };
    return wrapped;
  };
  const alone = await run(hm, { invokes: [{ tokens: tokens(1), block: READ }] });
  const [bad, good] = await Promise.allSettled([
    hm.run({ invokes: [{ tokens: tokens(3), block: READ }] }, hostile),
    hm.run({ invokes: [{ tokens: tokens(1), block: READ }] }, open),
  ]);
  assert.equal(bad.status, 'rejected');
  assert.match(
    String((bad as PromiseRejectedResult).reason.message),
    /message for invoke 7, which this request does not have/,
  );
  await assert.rejects(
    hm.run({ invokes: [{ tokens: tokens(3), block: READ }] }, hostile),
    /message for invoke 7, which this request does not have/,
    'alone: the same error',
  );
  assert.equal(good.status, 'fulfilled');
  assert.equal((good as PromiseFulfilledResult<RunResult>).value.batch?.requests, 2);
  assert.ok(sameRead((good as PromiseFulfilledResult<RunResult>).value, alone));
});

test('requests that cannot share a pass run apart: another prompt length, generation, barriers, gradients', async () => {
  const hm = await tinyModel();
  const [a, b, gen, barrier, grad] = await Promise.all([
    run(hm, { invokes: [{ tokens: tokens(1), block: READ }] }),
    run(hm, { invokes: [{ tokens: tokens(1).slice(0, 5), block: READ }] }),
    run(hm, { invokes: [{ tokens: tokens(1), block: READ }], newTokens: 2 }),
    run(hm, { invokes: [{ tokens: tokens(1), block: 'async (m, ctx) => { await ctx.barrier("x", 1); return 1; }' }] }),
    run(hm, {
      invokes: [
        {
          tokens: tokens(1),
          block: 'async (m, ctx) => { const h = await m.transformer.h[0].output; ctx.backward(h.sum()); return 1; }',
        },
      ],
    }),
  ]);
  assert.notEqual(a.batch?.id, b.batch?.id, 'another padded width: another batch');
  assert.equal(b.batch?.requests, 1);
  assert.equal(gen.batch, undefined, 'generation runs on its own');
  assert.equal(barrier.batch, undefined, 'barriers count the request’s own invokes');
  assert.equal(grad.batch, undefined, 'a backward runs on its own');
});

test('with batching off (batchRows 1) every request runs on its own', async () => {
  const { loadModel } = await import('../../gpu-agent/runtime/index.js');
  const { ensureModel } = await import('../../catalog/bundled/generate-model.js');
  const hm = await loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny', batchRows: 1 });
  try {
    const rs = await Promise.all([1, 2].map((k) => run(hm, { invokes: [{ tokens: tokens(k), block: READ }] })));
    for (const r of rs) assert.equal(r.batch, undefined);
  } finally {
    await hm.close();
  }
});

test('blocks that keep their batch waiting do not hold the others: those go on in a fork of the pass, with their solo bits', async () => {
  const hm = await tinyModel();
  const alone = await run(hm, { invokes: [{ tokens: tokens(1), block: READ }] });
  const swapAlone = await run(hm, { invokes: [{ tokens: tokens(2), block: SWAP }] });
  const order: string[] = [];
  const slow =
    'async (m) => { const h = await m.transformer.h[0].output; await new Promise((r) => setTimeout(r, 3000)); return h; }';
  const runs = [
    run(hm, { invokes: [{ tokens: tokens(3), block: slow }] }).then((r) => {
      order.push('slow');
      return r;
    }),
    run(hm, { invokes: [{ tokens: tokens(1), block: READ }] }).then((r) => {
      order.push('read');
      return r;
    }),
    run(hm, { invokes: [{ tokens: tokens(2), block: SWAP }] }).then((r) => {
      order.push('swap');
      return r;
    }),
  ];
  const [slowR, readR, swapR] = await Promise.all(runs);
  assert.equal(readR.batch?.id, slowR.batch?.id, 'started as one batch');
  assert.equal(order.at(-1), 'slow', 'the others finished while the slow block slept');
  assert.ok(sameRead(readR, alone) && sameRead(swapR, swapAlone), 'the fork computes their rows bit for bit');
  const slowAlone = await run(hm, {
    invokes: [{ tokens: tokens(3), block: 'async (m) => await m.transformer.h[0].output' }],
  });
  assert.ok(sameBits(value(slowR.invokes[0]!.result) as Tensor, value(slowAlone.invokes[0]!.result) as Tensor));
});

test("a barrier reached without naming it in the source pairs its own request's invokes only", async () => {
  const hm = await tinyModel();
  const meet = `async (m, ctx) => { await m.transformer.h[0].output; await ctx['bar' + 'rier']('x', 2); return ctx.invoke; }`;
  // Invoke 1 of this request reaches the barrier later in the pass, after leaving a value for invoke 0.
  const late = `async (m, ctx) => {
    if (ctx.invoke === 0) await m.transformer.h[0].output;
    else { await m.transformer.h[1].output; ctx.shared.v = 'from invoke 1'; }
    await ctx['bar' + 'rier']('x', 2);
    return ctx.shared.v ?? null;
  }`;
  const [b, a] = await Promise.all([
    run(hm, {
      invokes: [
        { tokens: tokens(3), block: late },
        { tokens: tokens(4), block: late },
      ],
    }),
    run(hm, {
      invokes: [
        { tokens: tokens(1), block: meet },
        { tokens: tokens(2), block: meet },
      ],
    }),
  ]);
  assert.equal(a.batch?.requests, 2, 'batched: the source does not name barrier');
  assert.equal(a.batch?.id, b.batch?.id);
  assert.deepEqual(
    a.invokes.map((i) => value(i.result)),
    [0, 1],
  );
  // Paired with another request's invoke, invoke 0 would go on before its own invoke 1 arrived (null).
  assert.deepEqual(
    b.invokes.map((i) => value(i.result)),
    ['from invoke 1', 'from invoke 1'],
  );
});

test("a parameter swap never reaches another request's rows", async () => {
  const hm = await tinyModel();
  const alone = await run(hm, { invokes: [{ tokens: tokens(1), block: READ }] });
  // Named in the source: the request runs on its own.
  const named = run(hm, {
    invokes: [
      {
        tokens: tokens(2),
        block: 'async (m) => { m.lm_head.weight = (await m.lm_head.weight).mul(0); return await m.output; }',
      },
    ],
  });
  // Not named: it reaches the batch, where the swap fails its own request only.
  const hidden = run(hm, {
    invokes: [
      {
        tokens: tokens(3),
        block: `async (m) => { const k = 'wei' + 'ght'; m.lm_head[k] = (await m.lm_head[k]).mul(0); return await m.output; }`,
      },
    ],
  });
  const reader = run(hm, { invokes: [{ tokens: tokens(1), block: READ }] });
  const [n, h, r] = await Promise.allSettled([named, hidden, reader]);
  assert.equal(n.status, 'fulfilled');
  assert.equal((n as PromiseFulfilledResult<RunResult>).value.batch, undefined, 'named: on its own');
  assert.equal(h.status, 'rejected');
  assert.match(String((h as PromiseRejectedResult).reason.message), /parameter swap cannot run in a batch/);
  assert.equal(r.status, 'fulfilled');
  assert.ok(sameRead((r as PromiseFulfilledResult<RunResult>).value, alone), 'the reader: bit for bit alone');
});
