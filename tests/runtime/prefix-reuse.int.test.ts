// Prefix reuse in sessions (gpu-agent/runtime/interleave/prefix-reuse.ts) on the bundled tiny model: the traces of a
// patching sweep written without skips start from the prefix an earlier trace with the same inputs computed, and
// every trace's values are bit-identical to the same trace run as its own request and to the session run with reuse
// off (NDIF_AGENT_PREFIX_CACHE=0) — in-process and in the sandbox. A trace that swaps a parameter, skips or caches a
// module before the prefix's end, intervenes earlier, or feeds other rows runs its own prefix (and is still right).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel, SessionRequest } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { tinyModel as sandboxModel, tinySandbox } from '../sandbox/helpers.js';
import { variants } from './hf-fixtures.js';
import { inProcess, run, sameBits, tinyModel, value } from './tiny-model.js';

const A = [464, 2068, 7586, 21831, 18045, 625, 262];
const B = [40, 1842, 3290, 373, 257, 1110, 13];
const ROWS = B.length;

let noReuse: Promise<HostedModel> | undefined;
function modelWithoutReuse(): Promise<HostedModel> {
  noReuse ??= loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny', prefixCacheBytes: 0 });
  return noReuse;
}

after(async () => {
  await (await tinyModel()).close();
  if (noReuse) await (await noReuse).close();
  await (await sandboxModel()).close();
});

/** Trace 0: the clean run's layer outputs into ctx.shared. */
const CACHE_CLEAN =
  'async (m, ctx) => { const c = await ctx.cache({ modules: [m.transformer.h] }); ctx.shared.clean = c.transformer.h.map((x) => x.output); }';

/** Invoke p patches position p of layer l's output with the clean run's (`clean`: an expression for that tensor). */
const patch = (l: number, clean: string) => `async (m, ctx) => {
  const h = (await m.transformer.h[${l}].output).clone();
  h.setSlice([0, ctx.invoke], ${clean}.slice(0, ctx.invoke));
  m.transformer.h[${l}].output = h;
  return (await m.output).slice(0, -1);
}`;

/** Blocks that touch the pass before layer 1's output: a parameter swap, a skip, a cache. */
const PARAM =
  'async (m, ctx) => { m.transformer.h[0].ln_1.weight = ctx.Tensor.full([64], 0.5); return (await m.transformer.h[1].output).slice(0, -1); }';
const SKIP = (clean: string) =>
  `async (m, ctx) => { m.transformer.h[0].skip(${clean}); return (await m.transformer.h[1].output).slice(0, -1); }`;
const CACHE_H0 =
  'async (m, ctx) => { const c = ctx.cache({ modules: [m.transformer.h[0]] }); const h1 = await m.transformer.h[1].output; return { h1: h1.slice(0, -1), h0: (await c).transformer.h[0].output }; }';
const READ_H1 = 'async (m) => (await m.transformer.h[1].output).slice(0, -1)';

interface Trace {
  rows: number[][];
  /** The block, given how it names clean layer l's output. */
  block: (clean: (l: number) => string) => string;
}

const rowsOf = (t: number[], n = ROWS) => Array.from({ length: n }, () => t);
const TRACES: Trace[] = [
  { rows: rowsOf(B), block: (c) => patch(1, c(1)) }, // leaves the pass up to layer 1's output
  { rows: rowsOf(B), block: (c) => patch(0, c(0)) }, // intervenes earlier: must not take layer 1's prefix
  { rows: rowsOf(B), block: (c) => patch(1, c(1)) }, // takes layer 1's prefix whole
  { rows: rowsOf(B), block: () => PARAM }, // a parameter read in layer 0 swapped: its own prefix
  { rows: rowsOf(B), block: (c) => SKIP(c(0)) }, // skips layer 0: its own prefix
  { rows: rowsOf(B), block: () => CACHE_H0 }, // caches layer 0: its own prefix
  { rows: [...rowsOf(B, ROWS - 1), A], block: () => READ_H1 }, // other rows: no prefix of B's
  { rows: rowsOf(B), block: () => READ_H1 }, // the pass up to layer 1 again
];

function session(): SessionRequest {
  return {
    traces: [
      { invokes: [{ tokens: A, block: CACHE_CLEAN }] },
      ...TRACES.map((t) => ({
        invokes: t.rows.map((tokens) => ({ tokens, block: t.block((l) => `ctx.shared.clean[${l}]`) })),
      })),
    ],
  };
}

/** Every invoke's value of every trace after the first, as tensors (objects: their tensors in key order). */
function tensors(traces: { invokes: { result: unknown }[] }[]): Tensor[][] {
  return traces.slice(1).map(
    (t) =>
      t.invokes.map((i) => {
        const v = value(i.result as never) as Tensor | Record<string, Tensor>;
        return 'data' in v ? (v as Tensor) : (v as Record<string, Tensor>);
      }) as Tensor[],
  );
}

function assertSameBits(a: Tensor[][], b: Tensor[][], what: string): void {
  assert.equal(a.length, b.length);
  for (let t = 0; t < a.length; t++)
    for (let i = 0; i < a[t]!.length; i++) {
      const [x, y] = [a[t]![i]!, b[t]![i]!];
      const pairs: [Tensor, Tensor][] =
        'data' in x ? [[x, y]] : Object.keys(x).map((k) => [(x as never)[k], (y as never)[k]] as [Tensor, Tensor]);
      for (const [p, q] of pairs) assert.ok(sameBits(p, q), `${what}: trace ${t + 1} invoke ${i} differs`);
    }
}

test('a patching sweep without skips reuses its prefixes and equals each trace as its own request, bit for bit', async () => {
  const hm = await tinyModel();
  const reused = await hm.runSession(session(), inProcess(hm));
  const hm0 = await modelWithoutReuse();
  const plain = await hm0.runSession(session(), inProcess(hm0));
  assertSameBits(tensors(reused.traces), tensors(plain.traces), 'reuse on against off');

  // Each trace as its own request, the clean run's outputs written into the blocks.
  const clean = await run(hm, {
    invokes: [{ tokens: A, block: 'async (m) => [await m.transformer.h[0].output, await m.transformer.h[1].output]' }],
  });
  const [h0, h1] = value(clean.invokes[0]!.result) as Tensor[];
  const literal = (t: Tensor) => `ctx.Tensor.from(${JSON.stringify(Array.from(t.data as Float32Array))}, [1, 7, 64])`;
  const alone = [];
  for (const t of TRACES)
    alone.push(
      await run(hm, {
        invokes: t.rows.map((tokens) => ({ tokens, block: t.block((l) => literal(l === 0 ? h0! : h1!)) })),
      }),
    );
  assertSameBits(tensors(reused.traces), tensors([clean, ...alone]), 'session against own requests');

  // Where the prefix was taken: fewer segment runs than the same trace with reuse off, and only there.
  const runs = (s: typeof reused) => s.traces.slice(1).map((t) => t.timings.segmentRuns);
  const [on, off] = [runs(reused), runs(plain)];
  const fewer = on.map((n, t) => n < off[t]!);
  assert.deepEqual(fewer, [false, false, true, false, false, false, false, true], `segment runs ${on} against ${off}`);
});

test('a sandboxed session reuses prefixes too and gives the in-process bits', async () => {
  const { sb, hm } = await tinySandbox({ poolSize: 1 });
  try {
    const inside = await hm.runSession(session(), sb.opener('gpt2-tiny'));
    const control = await hm.runSession(session(), inProcess(hm));
    assertSameBits(tensors(inside.traces), tensors(control.traces), 'sandbox against in-process');
    assert.equal(inside.traces[3]!.timings.segmentRuns, control.traces[3]!.timings.segmentRuns);
  } finally {
    await sb.close();
  }
});

test("a model output a snapshot holds reaches a trusted block as a copy: writing into it leaves later traces' bits alone", async () => {
  // BERT's last_hidden_state is a graph output computed before the pooler: a snapshot at the pooler's input holds it.
  const v = variants().find((x) => x.label === 'bert/dynamo')!;
  const hm = await loadModel(v.dir, { key: v.label });
  try {
    const tokens = [1, 5, 9, 2];
    const s = await hm.runSession(
      {
        traces: [
          { invokes: [{ tokens, block: 'async (m) => { await m.pooler.input; return 1; }' }] },
          {
            invokes: [
              {
                tokens,
                block:
                  'async (m) => { const [h] = await m.output; const before = h.clone(); h.data.fill(7); return before; }',
              },
            ],
          },
          { invokes: [{ tokens, block: 'async (m) => (await m.output)[0]' }] },
        ],
      },
      inProcess(hm),
    );
    assert.ok(s.traces[2]!.timings.segmentRuns < s.traces[0]!.timings.segmentRuns, 'the last trace took the prefix');
    const before = value(s.traces[1]!.invokes[0]!.result) as Tensor;
    const after = value(s.traces[2]!.invokes[0]!.result) as Tensor;
    assert.ok(sameBits(before, after), 'trace 2 sees what trace 1 saw before writing into it');
  } finally {
    await hm.close();
  }
});
