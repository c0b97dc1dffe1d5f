// Bad input gets a clear error with a code, and the runtime keeps serving: unknown module paths (nearest paths
// listed), swaps of the wrong shape / dtype / with non-finite values, blocks that throw (user frames only),
// never return (timeout) or do not compile, prompts longer than the model's positions, cancellation, and an
// untrusted block side that breaks the protocol.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { InterventionError, RequestError } from '../../gpu-agent/runtime/index.js';
import { channelPair } from '../../gpu-agent/block/index.js';
import type { BlockEndpoint, HostToBlock } from '../../protocol/interleave.js';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { run, tinyModel } from './tiny-model.js';

after(async () => (await tinyModel()).close());

const T = [464, 2068, 7586, 21831, 18045];

function fails(code: string, pattern?: RegExp) {
  return (e: unknown) => {
    assert.ok(
      e instanceof InterventionError || e instanceof RequestError,
      `expected a runtime error, got ${String(e)}`,
    );
    assert.equal(e.code, code, e.message);
    if (pattern) assert.match(e.message, pattern);
    return true;
  };
}

async function stillServes(): Promise<void> {
  const hm = await tinyModel();
  const r = await run(hm, { invokes: [{ tokens: T, block: 'async (m) => (await m.transformer.h[1].output).shape' }] });
  assert.deepEqual(r.invokes[0]!.result.tree, [1, 5, 64]);
}

test('unknown module path: the error lists the nearest valid paths', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, { invokes: [{ tokens: T, block: 'async (m) => { await m.transformer.h[0].mpl.output; }' }] }),
    fails('BLOCK_UNKNOWN_MODULE', /no module "transformer\.h\.0\.mpl"; nearest: transformer\.h\.0\.mlp/),
  );
  await assert.rejects(
    run(hm, { invokes: [{ tokens: T, block: 'async (m) => { await m.transfomer.h[0].output; }' }] }),
    fails('BLOCK_UNKNOWN_MODULE', /nearest: transformer\b/),
  );
  await assert.rejects(
    run(hm, { invokes: [{ tokens: T, block: 'async (m) => { await m.transformer.h[7].output; }' }] }),
    fails('BLOCK_UNKNOWN_MODULE', /transformer\.h has 2 modules \(indices 0 to 1\)/),
  );
  await assert.rejects(
    run(hm, { invokes: [{ tokens: T, block: 'async (m) => { await m.transformer.h.output; }' }] }),
    fails('BLOCK_NOT_OBSERVABLE', /list of modules; index it/),
  );
  await stillServes();
});

test('swap with the wrong shape, the wrong dtype, or non-finite values', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, {
      invokes: [
        {
          tokens: T,
          block:
            'async (m, ctx) => { await m.transformer.h[0].output; m.transformer.h[0].output = ctx.Tensor.zeros([1, 5, 32]); }',
        },
      ],
    }),
    fails('BLOCK_SHAPE_MISMATCH', /expected shape \[1, 5, 64\], got \[1, 5, 32\]/),
  );
  await assert.rejects(
    run(hm, {
      invokes: [
        { tokens: T, block: 'async (m, ctx) => { m.transformer.h[1].output = ctx.Tensor.zeros([2, 5, 64]); }' },
      ],
    }),
    fails('BLOCK_SHAPE_MISMATCH', /expected shape \[1, 5, 64\]/),
    'a swap ahead is checked against the manifest',
  );
  await assert.rejects(
    run(hm, {
      invokes: [
        {
          tokens: T,
          block:
            'async (m, ctx) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = h.to("int64"); }',
        },
      ],
    }),
    fails('BLOCK_DTYPE_MISMATCH', /expected float32, got int64/),
  );
  await assert.rejects(
    run(hm, {
      invokes: [
        {
          tokens: T,
          block:
            'async (m) => { const h = await m.transformer.h[0].output; h.setSlice([0, 2, 3], NaN); m.transformer.h[0].output = h; }',
        },
      ],
    }),
    fails('BLOCK_NON_FINITE', /element 131 is NaN/),
  );
  await assert.rejects(
    run(hm, {
      invokes: [
        {
          tokens: T,
          block: 'async (m) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = h.div(0); }',
        },
      ],
    }),
    fails('BLOCK_NON_FINITE'),
  );
  await stillServes();
});

test("a block that throws: the error keeps the user's frames and no host frames", async () => {
  const hm = await tinyModel();
  const source = [
    'async (m) => {',
    '  const h = await m.transformer.h[0].output;',
    '  function check(x) {',
    '    if (x.shape[1] > 2) throw new RangeError("sequence too long for my probe");',
    '  }',
    '  check(h);',
    '}',
  ].join('\n');
  let err: InterventionError | undefined;
  await run(hm, { invokes: [{ tokens: T, block: source }] }).catch((e: unknown) => (err = e as InterventionError));
  assert.ok(err instanceof InterventionError);
  assert.equal(err.code, 'BLOCK_ERROR');
  assert.equal(err.blockError.message, 'RangeError: sequence too long for my probe');
  const stack = err.blockError.stack!;
  const frames = stack.split('\n').filter((l) => /^\s+at /.test(l));
  assert.ok(frames.length >= 2, stack);
  assert.ok(
    frames.every((f) => f.includes('block-0.js')),
    `only block frames:\n${stack}`,
  );
  assert.match(frames[0]!, /check \(block-0\.js:4:\d+\)/, "line numbers are the user's");
  assert.match(frames[1]!, /block-0\.js:6:\d+/);
  assert.doesNotMatch(stack, /gpu-agent|node:internal|dist-/);
  await stillServes();
});

test('a block that never returns: the request times out and the runtime serves the next one', async () => {
  const hm = await tinyModel();
  const t0 = performance.now();
  await assert.rejects(
    run(hm, {
      timeoutMs: 300,
      invokes: [{ tokens: T, block: 'async (m) => { await m.transformer.h[0].output; await new Promise(() => {}); }' }],
    }),
    fails('REQUEST_TIMEOUT', /did not finish within 300 ms/),
  );
  assert.ok(performance.now() - t0 < 3000);
  await stillServes();
});

test('cancelling with an AbortSignal stops the request', async () => {
  const hm = await tinyModel();
  const ac = new AbortController();
  setTimeout(() => ac.abort('user pressed stop'), 100);
  await assert.rejects(
    run(hm, { signal: ac.signal, invokes: [{ tokens: T, block: 'async () => { await new Promise(() => {}); }' }] }),
    fails('REQUEST_CANCELLED', /user pressed stop/),
  );
  await stillServes();
});

test("a prompt longer than the model's positions is refused before anything runs", async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, { invokes: [{ tokens: new Array(129).fill(11), block: 'async () => 1' }] }),
    fails('PROMPT_TOO_LONG', /129 prompt tokens need 129 positions; model gpt2-tiny has 128/),
  );
  await assert.rejects(
    run(hm, { newTokens: 10, invokes: [{ tokens: new Array(120).fill(11) }] }),
    fails(
      'GENERATION_TOO_LONG',
      /\+ 9 generated tokens fed back need 129 positions; model gpt2-tiny has 128\. Generate at most 9 tokens/,
    ),
  );
  await assert.rejects(
    run(hm, { invokes: [{ tokens: [1, 50257] }] }),
    fails('INVOKE_TOKEN_OUT_OF_RANGE', /\[0, 50257\)/),
  );
  await assert.rejects(run(hm, { invokes: [{ prompt: '' }] }), fails('INVOKE_EMPTY_PROMPT'));
  await assert.rejects(run(hm, { invokes: [] }), fails('REQUEST_NO_INVOKES'));
  await stillServes();
});

test('malformed block source and unsavable results', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, { invokes: [{ tokens: T, block: 'async (m) => {\n  const x = ;\n}' }] }),
    fails('BLOCK_SYNTAX_ERROR', /does not compile \(line 2, column 13\): SyntaxError: Unexpected token ';'/),
  );
  await assert.rejects(
    run(hm, { invokes: [{ tokens: T, block: '42' }] }),
    fails('BLOCK_SYNTAX_ERROR', /must be a function expression/),
  );
  await assert.rejects(
    run(hm, { invokes: [{ tokens: T, block: 'async () => ({ f: () => 1 })' }] }),
    fails('BLOCK_INVALID_RESULT', /result\.f is a function/),
  );
  await stillServes();
});

/** Acts as an untrusted block side: scripted messages over the real channel. */
function scripted(script: (ep: BlockEndpoint, seen: HostToBlock[]) => Promise<void>) {
  return () => {
    const { host, blocks } = channelPair();
    const seen: HostToBlock[] = [];
    const recording: BlockEndpoint = {
      send: (m) => blocks.send(m),
      receive: async () => {
        const m = await blocks.receive();
        seen.push(m);
        return m;
      },
      close: () => blocks.close(),
    };
    void script(recording, seen).catch(() => {});
    return host;
  };
}

test('the host re-checks what a block side sends (a sandboxed runner is not trusted)', async () => {
  const hm = await tinyModel();
  let raised: HostToBlock | undefined;
  await hm
    .run(
      { invokes: [{ tokens: T }] },
      scripted(async (ep) => {
        await ep.receive(); // START
        ep.send({ kind: 'WAIT', invoke: 0, addr: 'transformer.h.1.output.0' });
        await ep.receive(); // VALUE
        ep.send({ kind: 'WAIT', invoke: 0, addr: 'transformer.h.0.output.0' });
        raised = await ep.receive();
        ep.send({ kind: 'WAIT', invoke: 0, addr: 'transformer.h.9.output.0' });
        const unknown = await ep.receive();
        assert.equal(unknown.kind, 'RAISE');
        ep.send({
          kind: 'END',
          invoke: 0,
          result: { tree: unknown.kind === 'RAISE' ? unknown.error.message : null, tensors: [] },
        });
      }),
    )
    .then((r) =>
      assert.match(String(r.invokes[0]!.result.tree), /no module "transformer\.h\.9"; nearest: transformer\.h\.0/),
    );
  assert.ok(raised && raised.kind === 'RAISE');
  assert.equal(raised.error.type, 'OutOfOrder');
  assert.match(
    raised.error.message,
    /transformer\.h\.0\.output\.0 was requested after the forward pass had reached transformer\.h\.1\.output\.0/,
  );

  const nan = Tensor.zeros([1, 5, 64]).fill(NaN).toPayload();
  await assert.rejects(
    hm.run(
      { invokes: [{ tokens: T }] },
      scripted(async (ep) => {
        await ep.receive();
        ep.send({ kind: 'SWAP', invoke: 0, addr: 'transformer.h.1.output.0', values: [nan] });
        ep.send({ kind: 'END', invoke: 0, result: { tree: null, tensors: [] } });
      }),
    ),
    fails('BLOCK_NON_FINITE'),
  );
  await assert.rejects(
    hm.run(
      { invokes: [{ tokens: T }] },
      scripted(async (ep) => {
        await ep.receive();
        ep.send({
          kind: 'SWAP',
          invoke: 0,
          addr: 'transformer.h.1.output.0',
          values: [{ dtype: 'float32', shape: [1, 5, 64], data: new Uint8Array(12) }],
        });
        ep.send({ kind: 'END', invoke: 0, result: { tree: null, tensors: [] } });
      }),
    ),
    fails('BLOCK_PROTOCOL_ERROR', /needs 1280 bytes, got 12/),
  );
  await assert.rejects(
    hm.run(
      { invokes: [{ tokens: T }] },
      scripted(async (ep) => {
        await ep.receive();
        ep.send({ kind: 'END', invoke: 3, result: { tree: null, tensors: [] } });
      }),
    ),
    fails('BLOCK_PROTOCOL_ERROR', /invoke 3/),
  );
  await stillServes();
});
