// Same script, same bytes: each script runs trusted twice (the control: the trusted path must agree with
// itself), then trusted against untrusted, on the bundled tiny model through the real host. Every returned
// tensor must be bit-identical, and so must the rest of the result, the generated tokens and the logs.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { HostedModel, RunRequest, RunResult, SessionRequest } from '../../gpu-agent/runtime/index.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { inProcess, tinyModel, tinySandbox } from './helpers.js';

const A = [464, 2068, 7586, 21831, 18045, 625, 262];
const B = [40, 1842, 3290];

const SCRIPTS: Record<string, RunRequest> = {
  'reads at several depths': {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => ({ emb: await m.transformer.wte.output, q: await m.transformer.h[0].attn.c_attn.output, h1: await m.transformer.h[1].output, logits: await m.output })',
      },
    ],
  },
  'swap after reading and swap ahead': {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
          m.transformer.h[0].mlp.output = ctx.Tensor.zeros([1, 7, 64]);
          const h = await m.transformer.h[1].output;
          m.transformer.h[1].output = h.mul(0.5);
          return { h, logits: await m.output };
        }`,
      },
    ],
  },
  'a model variant: its edit runs with the block, first': {
    edit: {
      key: 'gpt2-tiny@zero-mlp0',
      source: `async (m) => { m.transformer.h[0].mlp.output = (await m.transformer.h[0].mlp.output).mul(0); }`,
    },
    invokes: [{ tokens: A, block: 'async (m) => ({ h: await m.transformer.h[1].output, logits: await m.output })' }],
  },
  'a parameter read and swapped for the request': {
    invokes: [
      {
        tokens: A,
        block: `async (m) => {
          const w = await m.transformer.h[0].attn.c_attn.weight;
          m.transformer.h[0].attn.c_attn.weight = w.mul(0.5);
          return { w, unembed: (await m.lm_head.weight).shape, logits: await m.output };
        }`,
      },
    ],
  },
  'input swap and skip': {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
          const x = await m.transformer.h[0].ln_1.input;
          m.transformer.h[0].ln_1.input = x.mul(2);
          m.transformer.h[1].skip(ctx.Tensor.full([1, 7, 64], 0.125));
          return await m.output;
        }`,
      },
    ],
  },
  'several invokes in one batch, each swapping its own rows': {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = h.zerosLike(); return { h, logits: await m.output }; }',
      },
      {
        tokens: B,
        block:
          'async (m) => { console.log("invoke 1 reads"); return { h: await m.transformer.h[0].output, logits: await m.output }; }',
      },
    ],
  },
  'generation steps with reads and a swap at a later step': {
    newTokens: 3,
    invokes: [
      {
        tokens: B,
        block: `async (m, ctx) => {
          const out = [];
          for (let s = 0; s < ctx.steps; s++) {
            const h = await m.step(s).transformer.h[1].output;
            if (s === 1) m.step(s).transformer.h[1].output = h.neg();
            out.push(h);
            console.log('step', s, h.shape.join('x'));
          }
          return { out, last: await m.step(ctx.steps - 1).output };
        }`,
      },
    ],
  },
  'm.iter over sampled generation with a finished row (STEP frames, ctx.generated, ctx.finished)': {
    generation: { maxNewTokens: 5, temperature: 0.9, seed: 4, ignoreEos: true },
    invokes: [
      {
        tokens: A,
        generation: { maxNewTokens: 2 },
        block: `async (m, ctx) => {
          const seen = await m.all(async (s, i) => ({ i, h: await s.transformer.h[0].output, generated: ctx.generated }));
          return { seen, finished: ctx.finished, generated: ctx.generated, cached: ctx.cached };
        }`,
      },
      { tokens: B, block: 'async (m) => m.iter([1, null], async (s, i) => (await s.output).argmax(-1))' },
    ],
  },
  'backward: gradients read latest first, one swapped, two invokes each with its own loss': {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
          await m.transformer.h[0].output;
          const l = (await m.output).slice(0, -1);
          ctx.backward(l.slice(7).sub(l.slice(11)));
          const h1 = await m.transformer.h[1].output.grad;
          m.transformer.h[1].output.grad = h1.mul(-3);
          return { h1, h0: await m.transformer.h[0].output.grad, wte: await m.transformer.wte.output.grad };
        }`,
      },
      {
        tokens: B,
        block:
          'async (m) => { const p = (await m.output).slice(0, -1).logSoftmax(-1); p.slice(42).backward(); return await m.transformer.h[1].attn.output.grad; }',
      },
    ],
  },
  'backward at a generation step': {
    newTokens: 2,
    invokes: [
      {
        tokens: B,
        block: `async (m, ctx) => {
          const s = m.step(1);
          const h = await s.transformer.h[0].mlp.output;
          const l = (await s.output).slice(0, -1);
          ctx.backward(l.slice(3).sub(l.slice(4)).add(h.sum().mul(0.01)));
          return await s.transformer.h[0].mlp.output.grad;
        }`,
      },
    ],
  },
  'module calls (the logit lens), a caught refusal, named inputs': {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
          const ins = await m.transformer.h[0].namedInputs;
          const h = await m.transformer.h[0].output;
          let refused;
          try { await m.transformer.h[1].attn.call(ctx.Tensor.zeros([1, 7, 64]), ctx.Tensor.zeros([1, 1, 7, 7])); } catch (e) { refused = e.name + ': ' + e.message; }
          const lens = await m.lm_head.call(await m.transformer.ln_f.call(h));
          return { names: Object.keys(ins), refused, lens: lens.slice(0, -1), last: await m.lm_head.call(await m.transformer.ln_f.call(h.slice(null, [-1]))) };
        }`,
      },
    ],
  },
  'a barrier patch across invokes and a cache with inputs': {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { const c = await ctx.cache({ modules: ["transformer.wte", "transformer.h.0.*", "transformer.h.0"], inputs: true }); ctx.shared.h = c.transformer.h[0].output; await ctx.barrier("h0"); return c; }',
      },
      {
        tokens: A,
        block:
          'async (m, ctx) => { const h = await m.transformer.h[0].output; await ctx.barrier("h0"); const v = h.clone(); v.setSlice([0, 3], ctx.shared.h.slice(0, 3).mul(-1)); m.transformer.h[0].output = v; return (await m.output).slice(0, -1); }',
      },
    ],
  },
  'tokenizer, tensor maths and plain values': {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
          const ids = ctx.encode('Hello sandbox');
          const h = await m.transformer.h[1].output;
          return { ids, text: ctx.decode(ids), mean: h.mean().item(), top: (await m.output).argmax(-1), nested: { a: [1, 'two', null, true] } };
        }`,
      },
    ],
  },
};

let hm: HostedModel;
let sb: Sandbox;

before(async () => {
  ({ sb, hm } = await tinySandbox({ poolSize: 2 }));
});

after(async () => {
  await sb.close();
  await (await tinyModel()).close();
});

function assertSame(a: RunResult, b: RunResult, what: string): number {
  assert.equal(a.invokes.length, b.invokes.length, `${what}: invoke count`);
  let tensors = 0;
  a.invokes.forEach((x, i) => {
    const y = b.invokes[i]!;
    assert.deepEqual(x.result.tree, y.result.tree, `${what}: invoke ${i} result tree`);
    assert.equal(x.result.tensors.length, y.result.tensors.length, `${what}: invoke ${i} tensor count`);
    x.result.tensors.forEach((t, k) => {
      const u = y.result.tensors[k]!;
      assert.equal(t.dtype, u.dtype, `${what}: invoke ${i} tensor ${k} dtype`);
      assert.deepEqual(t.shape, u.shape, `${what}: invoke ${i} tensor ${k} shape`);
      assert.ok(
        Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).equals(
          Buffer.from(u.data.buffer, u.data.byteOffset, u.data.byteLength),
        ),
        `${what}: invoke ${i} tensor ${k} bytes`,
      );
      tensors++;
    });
    assert.deepEqual(x.generated, y.generated, `${what}: invoke ${i} generated tokens`);
  });
  assert.equal(a.steps, b.steps);
  assert.deepEqual(a.logs, b.logs, `${what}: logs`);
  return tensors;
}

test('bit-exact trusted and untrusted: a session of a clean and a patched trace (values carried in ctx.shared, ctx.traces)', async () => {
  const req: SessionRequest = {
    traces: [
      {
        invokes: [
          {
            tokens: A,
            block:
              'async (m, ctx) => { ctx.shared.clean = await ctx.cache({ modules: ["transformer.h"] }); console.log("trace", ctx.trace, "of", ctx.traceCount); return (await m.output).slice(0, -1); }',
          },
        ],
      },
      {
        invokes: [0, 1, 2].map((p) => ({
          tokens: B,
          block: `async (m, ctx) => { const h = await m.transformer.h[1].output; const v = h.clone(); v.setSlice([0, ${p}], ctx.shared.clean.transformer.h[1].output.slice(0, ${p})); m.transformer.h[1].output = v; return { before: ctx.traces[0][0].shape, logits: (await m.output).slice(0, -1) }; }`,
        })),
      },
    ],
  };
  const control = await hm.runSession(req, inProcess(hm));
  const untrusted = await hm.runSession(req, sb.opener('gpt2-tiny'));
  assert.equal(untrusted.traces.length, 2);
  let n = 0;
  control.traces.forEach((t, i) => {
    n += assertSame(t, untrusted.traces[i]!, `trace ${i}`);
  });
  assert.ok(n >= 4);
  assert.deepEqual(
    control.traces[0]!.logs.map((l) => l.line),
    ['trace 0 of 2'],
  );
});

test('bit-exact trusted and untrusted: a training loop (a steering vector and a low-rank adapter, Adam, 4 traces)', async () => {
  const block = `async (m, ctx) => {
    const s = ctx.shared;
    if (!s.v) {
      s.v = ctx.Tensor.randn([64], 3).mul(0.01).requiresGrad_();
      s.A = ctx.Tensor.randn([2, 256], 4).mul(0.05).requiresGrad_();
      s.B = ctx.Tensor.zeros([64, 2]).requiresGrad_();
      s.opt = new ctx.optim.Adam([s.v, s.A, s.B], { lr: 0.05 });
    }
    const h = await m.transformer.h[0].output;
    m.transformer.h[0].output = h.add(s.v);
    const proj = m.transformer.h[1].mlp.c_proj;
    const x = await proj.input;
    proj.output = (await proj.output).add(x.matmul(s.A.transpose(0, 1)).matmul(s.B.transpose(0, 1)).gelu());
    const logits = (await m.output).index(0);
    const loss = logits.slice([0, -1]).crossEntropy(ctx.tokens.slice(1));
    s.opt.zeroGrad();
    await loss.backward();
    await s.opt.step();
    return { loss, v: s.v.detach(), B: s.B.detach() };
  }`;
  const req: SessionRequest = { traces: [0, 1, 2, 3].map(() => ({ invokes: [{ tokens: A, block }] })) };
  const control = await hm.runSession(req, inProcess(hm));
  const untrusted = await hm.runSession(req, sb.opener('gpt2-tiny'));
  let n = 0;
  for (const [i, t] of control.traces.entries()) n += assertSame(t, untrusted.traces[i]!, `trace ${i}`);
  assert.ok(n >= 12, `compared ${n} tensors`);
});

test('bit-exact trusted and untrusted: a loop (a repeated trace of 40 iterations over a data set of 3, batch 2) with reports', async () => {
  const block = `async (m, ctx) => {
    const s = ctx.shared;
    if (!s.v) {
      s.v = ctx.Tensor.randn([64], 5).mul(0.01).requiresGrad_();
      s.opt = new ctx.optim.SGD([s.v], { lr: 0.05, momentum: 0.9 });
    }
    const h = await m.transformer.h[0].output;
    m.transformer.h[0].output = h.add(s.v);
    const out = (await m.transformer.h[1].output).index(0);
    const loss = out.mseLoss(ctx.Tensor.ones(out.shape));
    if (ctx.invoke === 0) s.opt.zeroGrad();
    await loss.backward();
    await ctx.barrier('step');
    if (ctx.invoke === 1) await s.opt.step();
    ctx.report({ loss: loss.item(), it: ctx.iteration });
    return { loss, v: s.v.detach(), tokens: ctx.tokens.length, it: ctx.iteration };
  }`;
  const events: Record<string, unknown[]> = { control: [], untrusted: [] };
  const req = (side: string): SessionRequest => ({
    traces: [
      {
        invokes: [A, B, [...A, 13]].map((tokens) => ({ tokens, block })),
        repeat: { times: 40, batch: 2 },
      },
    ],
    progressIntervalMs: 1_000_000,
    onTrace: (e) => events[side]!.push(e.status === 'COMPLETED' ? { ...e, ms: 0 } : e),
  });
  const control = await hm.runSession(req('control'), inProcess(hm));
  const untrusted = await hm.runSession(req('untrusted'), sb.opener('gpt2-tiny'));
  assert.equal(untrusted.traces[0]!.iterations, 40);
  const n = assertSame(control.traces[0]!, untrusted.traces[0]!, 'the last iteration');
  assert.ok(n >= 4, `compared ${n} tensors`);
  assert.deepEqual(events.untrusted, events.control, 'the same progress, reports included');
  const end = events.control!.at(-1) as { done: number; reported: { iteration: number; value: { it: number } } };
  assert.equal(end.done, 40);
  assert.equal(end.reported.iteration, 39);
  assert.equal(end.reported.value.it, 39);
});

for (const [name, req] of Object.entries(SCRIPTS)) {
  test(`bit-exact trusted and untrusted: ${name}`, async () => {
    const control1 = await hm.run(req, inProcess(hm));
    const control2 = await hm.run(req, inProcess(hm));
    assertSame(control1, control2, 'control (trusted twice)');
    const untrusted = await hm.run(req, sb.opener('gpt2-tiny'));
    const n = assertSame(control1, untrusted, 'trusted vs untrusted');
    assert.ok(n > 0 || name.startsWith('tokenizer'), 'compared at least one tensor');
  });
}
