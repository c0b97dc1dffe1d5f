// Sessions (nnsight's model.session()) on the bundled tiny model: several traces in one request, one turn on the
// model and one channel to the blocks; ctx.shared and ctx.traces carry values from trace to trace without leaving the
// blocks' process; each trace's results equal the same traces run as separate requests; a failure names its trace;
// bad traces are refused before anything runs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { InterventionError, RequestError } from '../../gpu-agent/runtime/index.js';
import type { RunResult } from '../../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { run, sameBits, tinyModel, value } from './tiny-model.js';

after(async () => (await tinyModel()).close());

const A = [464, 2068, 7586, 21831, 18045, 625, 262];
const B = [40, 1842, 3290, 373, 257, 1110, 13];

const openIn = async () => {
  const hm = await tinyModel();
  return () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
};

test('a session of a clean and a patched trace equals the two as separate requests, bit for bit', async () => {
  const hm = await tinyModel();
  const clean = `async (m, ctx) => { ctx.shared.h = await m.transformer.h[0].output; return (await m.output).slice(0, -1); }`;
  const patched = `async (m, ctx) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = ctx.shared.h; return { logits: (await m.output).slice(0, -1), fromTrace0: ctx.traces[0][0].shape, trace: ctx.trace, of: ctx.traceCount }; }`;
  const s = await hm.runSession(
    { traces: [{ invokes: [{ tokens: A, block: clean }] }, { invokes: [{ tokens: B, block: patched }] }] },
    await openIn(),
  );
  const first = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: 'async (m) => ({ h: await m.transformer.h[0].output, logits: (await m.output).slice(0, -1) })',
      },
    ],
  });
  const { h, logits } = value(first.invokes[0]!.result) as { h: Tensor; logits: Tensor };
  const row = JSON.stringify(Array.from(h.data as Float32Array));
  const second = await run(hm, {
    invokes: [
      {
        tokens: B,
        block: `async (m, ctx) => { await m.transformer.h[0].output; m.transformer.h[0].output = ctx.Tensor.from(${row}, [1, 7, 64]); return (await m.output).slice(0, -1); }`,
      },
    ],
  });
  assert.ok(sameBits(value(s.traces[0]!.invokes[0]!.result) as Tensor, logits));
  const t1 = value(s.traces[1]!.invokes[0]!.result) as {
    logits: Tensor;
    fromTrace0: number[];
    trace: number;
    of: number;
  };
  assert.ok(
    sameBits(t1.logits, value(second.invokes[0]!.result) as Tensor),
    'the patched trace equals the second request',
  );
  assert.deepEqual(t1.fromTrace0, [50257], 'ctx.traces holds what trace 0 returned');
  assert.deepEqual([t1.trace, t1.of], [1, 2]);
  assert.equal(s.traces[1]!.invokes[0]!.tokens.length, 7);
});

test('a session keeps its traces in order; a request sent while its block waits runs meanwhile (model turns)', async () => {
  const hm = await tinyModel();
  const order: string[] = [];
  const slow =
    'async (m) => { await m.transformer.h[0].output; await new Promise((r) => setTimeout(r, 30)); return 1; }';
  const session = hm
    .runSession(
      {
        traces: [{ invokes: [{ tokens: A, block: slow }] }, { invokes: [{ tokens: A, block: slow }] }],
        onTrace: (e) => order.push(`trace ${e.trace} ${e.status}`),
      },
      await openIn(),
    )
    .then(() => order.push('session done'));
  const other = run(hm, { invokes: [{ tokens: B, block: 'async () => 2' }] }).then(() =>
    order.push('other request done'),
  );
  await Promise.all([session, other]);
  assert.deepEqual(
    order.filter((o) => o.startsWith('trace') || o === 'session done'),
    ['trace 0 RUNNING', 'trace 0 COMPLETED', 'trace 1 RUNNING', 'trace 1 COMPLETED', 'session done'],
  );
  assert.ok(
    order.indexOf('other request done') < order.indexOf('trace 0 COMPLETED'),
    `the other request did not wait for the session: ${order.join(', ')}`,
  );
});

test('a failure in a later trace names the trace; the model serves the next request', async () => {
  const hm = await tinyModel();
  const events: string[] = [];
  const err = await hm
    .runSession(
      {
        traces: [
          { invokes: [{ tokens: A, block: 'async (m, ctx) => { ctx.shared.x = 1; }' }] },
          { invokes: [{ tokens: A, block: 'async (m, ctx) => {\n  throw new Error("no " + ctx.shared.x);\n}' }] },
        ],
        onTrace: (e) => events.push(`${e.trace} ${e.status}`),
      },
      await openIn(),
    )
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.ok(err instanceof InterventionError, String(err));
  assert.equal(err.trace, 1);
  assert.match(err.blockError.message, /^trace 1: Error: no 1$/);
  assert.match(err.blockError.stack ?? '', /block-0\.js:2:/);
  assert.deepEqual(events, ['0 RUNNING', '0 COMPLETED', '1 RUNNING', '1 ERROR']);
  const r: RunResult = await run(hm, { invokes: [{ tokens: A, block: 'async () => "fine"' }] });
  assert.equal(value(r.invokes[0]!.result), 'fine');
});

test('every trace is checked before anything runs: a bad one refuses the session, naming it', async () => {
  const hm = await tinyModel();
  let ran = false;
  const open = async () => {
    ran = true;
    return (await openIn())();
  };
  await assert.rejects(
    hm.runSession({ traces: [{ invokes: [{ tokens: A }] }, { invokes: [{ tokens: [1, 99999999] }] }] }, open),
    (e: unknown) =>
      e instanceof RequestError &&
      e.code === 'INVOKE_TOKEN_OUT_OF_RANGE' &&
      /^trace 1: invoke 0/.test(e.message) &&
      (e.details as { trace: number }).trace === 1,
  );
  await assert.rejects(
    hm.runSession({ traces: [] }, open),
    (e: unknown) => e instanceof RequestError && e.code === 'SESSION_NO_TRACES',
  );
  await assert.rejects(
    hm.runSession({ traces: [{ invokes: [{ tokens: A, block: 'async (m) => {' }] }] }, open),
    (e: unknown) => e instanceof InterventionError && e.code === 'BLOCK_SYNTAX_ERROR',
  );
  assert.equal(ran, false);
});

test('a trace may generate: its steps, tokens and the shared values reach the next trace', async () => {
  const hm = await tinyModel();
  const s = await hm.runSession(
    {
      traces: [
        {
          invokes: [
            {
              tokens: A,
              block:
                'async (m, ctx) => { const seen = await m.all(async (s) => (await s.transformer.h[0].output).shape[1]); ctx.shared.generated = ctx.generated; return seen; }',
            },
          ],
          generation: { maxNewTokens: 3 },
        },
        { invokes: [{ tokens: B, block: 'async (m, ctx) => ctx.shared.generated' }] },
      ],
    },
    await openIn(),
  );
  assert.deepEqual(value(s.traces[0]!.invokes[0]!.result), [7, 1, 1]);
  // What trace 0's block saw of its tokens when it returned (after step 2's value: the tokens of steps 0 and 1).
  assert.deepEqual(value(s.traces[1]!.invokes[0]!.result), s.traces[0]!.invokes[0]!.generated.slice(0, 2));
  assert.equal(s.traces[0]!.steps, 3);
  assert.equal(s.traces[1]!.steps, 1);
});
