// Request planning (gpu-agent/runtime/serving/request-plan.ts) without a loaded model: what a request is refused for,
// with which code, and the START and generation plan it becomes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planRequest, planSession } from '../../gpu-agent/runtime/serving/request-plan.js';
import type { RequestModel } from '../../gpu-agent/runtime/serving/request-plan.js';
import { InterventionError, RequestError, RequestErrorCode } from '../../gpu-agent/runtime/errors.js';
import { GenerationErrorCode } from '../../protocol/generation.js';
import type { RunRequest } from '../../gpu-agent/runtime/interleave/request-types.js';

/** A tokenizer of single characters: 'a' is 0, 'b' 1, … */
const letters = {
  encode: (text: string) => [...text].map((c) => c.charCodeAt(0) - 97),
  decode: (ids: number[]) => ids.map((i) => String.fromCharCode(97 + i)).join(''),
};

const MODEL: RequestModel = {
  key: 'tiny',
  vocabSize: 26,
  maxPositions: 8,
  inputNames: ['input_ids', 'attention_mask'],
  outputNames: ['logits'],
  generative: true,
  padding: 'left',
  kvMode: 'past',
  tokenizer: letters,
};

function refused(model: RequestModel, req: Partial<RunRequest>, code: string): void {
  assert.throws(
    () => planRequest(model, req as RunRequest),
    (e: unknown) => e instanceof RequestError && e.code === code,
    `expected ${code} for ${JSON.stringify(req)}`,
  );
}

test('a request becomes a START of one batch row per invoke, prompts tokenized', () => {
  const { start, generation } = planRequest(MODEL, {
    requestId: 'r1',
    invokes: [{ prompt: 'abc', block: 'async (m) => 1' }, { tokens: [3, 4] }],
  });
  assert.equal(start.requestId, 'r1');
  assert.equal(start.steps, 1);
  assert.equal(start.cache, false);
  assert.deepEqual(
    start.invokes.map((i) => [i.invoke, i.tokens, i.batchStart, i.batchSize, i.source]),
    [
      [0, [0, 1, 2], 0, 1, 'async (m) => 1'],
      [1, [3, 4], 1, 1, ''],
    ],
  );
  assert.equal(generation, null, 'no new tokens: a single forward pass');
});

test('generating: one step per new token, the KV cache when the model has one, seeds per row', () => {
  const { start, generation } = planRequest(MODEL, { requestId: 'r2', invokes: [{ tokens: [1, 2] }], newTokens: 3 });
  assert.equal(start.steps, 3);
  assert.equal(start.cache, true);
  assert.ok(generation);
  assert.equal(generation.maxNewTokens, 3);
  assert.equal(generation.cached, true);
  assert.deepEqual(generation.rows[0]!.prompt, [1, 2]);
  assert.equal(generation.decode?.([0, 1]), 'ab');
  const none = planRequest({ ...MODEL, kvMode: 'none' }, { invokes: [{ tokens: [1] }], newTokens: 3 });
  assert.equal(none.start.cache, false, 'no cache to carry');
  const grads = planRequest(MODEL, {
    invokes: [{ tokens: [1], block: 'async (m, ctx) => { ctx.backward(1); }' }],
    newTokens: 3,
  });
  assert.equal(grads.start.cache, false, 'a block taking gradients runs every step over the whole sequence');
});

test('bad input is refused with its code, before anything runs', () => {
  refused(MODEL, { invokes: [] }, RequestErrorCode.noInvokes);
  refused(MODEL, { invokes: [{ tokens: [1] }], newTokens: -1 }, RequestErrorCode.badNewTokens);
  refused(MODEL, { invokes: [{ prompt: 'a', tokens: [1] }] }, RequestErrorCode.badInput);
  refused(MODEL, { invokes: [{}] }, RequestErrorCode.badInput);
  refused(MODEL, { invokes: [{ tokens: [1], block: 3 as unknown as string }] }, RequestErrorCode.badInput);
  refused(MODEL, { invokes: [{ tokens: [26] }] }, RequestErrorCode.tokenOutOfRange);
  refused(MODEL, { invokes: [{ tokens: [1.5] }] }, RequestErrorCode.tokenOutOfRange);
  refused(MODEL, { invokes: [{ tokens: [] }] }, RequestErrorCode.emptyPrompt);
  refused(MODEL, { invokes: [{ prompt: 'abcdefghi' }] }, RequestErrorCode.promptTooLong);
  refused(MODEL, { invokes: [{ prompt: 'abcdef' }], newTokens: 4 }, GenerationErrorCode.tooLong);
  refused({ ...MODEL, tokenizer: null }, { invokes: [{ prompt: 'a' }] }, RequestErrorCode.noTokenizer);
  refused(
    { ...MODEL, generative: false },
    { invokes: [{ tokens: [1] }], newTokens: 1 },
    RequestErrorCode.notGenerative,
  );
  refused(
    { ...MODEL, padding: 'none' },
    { invokes: [{ tokens: [1] }, { tokens: [1, 2] }] },
    RequestErrorCode.paddingUnsupported,
  );
  refused(
    MODEL,
    { invokes: [{ tokens: [1], generation: { stopTokenIds: [99] } }], newTokens: 2 },
    GenerationErrorCode.badOption,
  );
  refused(
    { ...MODEL, tokenizer: null },
    { invokes: [{ tokens: [1], generation: { stop: ['x'] } }], newTokens: 2 },
    GenerationErrorCode.badOption,
  );
  // The absent case: the same requests within bounds are planned.
  assert.equal(planRequest(MODEL, { invokes: [{ prompt: 'abcdefgh' }] }).start.invokes[0]!.tokens.length, 8);
  assert.equal(
    planRequest({ ...MODEL, padding: 'none' }, { invokes: [{ tokens: [1] }, { tokens: [2] }] }).start.steps,
    1,
  );
});

test("a block that is not one function expression is refused as the invoke's BlockSyntaxError", () => {
  assert.throws(
    () => planRequest(MODEL, { invokes: [{ tokens: [1] }, { tokens: [1], block: 'let x = ' }] }),
    (e: unknown) => e instanceof InterventionError && e.invoke === 1 && e.blockError.type === 'BlockSyntaxError',
  );
});

test('a session plans every trace first; a bad trace is refused naming it', () => {
  const traces = planSession(MODEL, {
    requestId: 's',
    traces: [{ invokes: [{ tokens: [1] }] }, { invokes: [{ prompt: 'ab' }] }],
  });
  assert.deepEqual(
    traces.map((t) => [t.start.requestId, t.start.trace]),
    [
      ['s', { index: 0, count: 2 }],
      ['s', { index: 1, count: 2 }],
    ],
  );
  assert.throws(
    () => planSession(MODEL, { traces: [] }),
    (e: unknown) => e instanceof RequestError && e.code === RequestErrorCode.noTraces,
  );
  assert.throws(
    () => planSession(MODEL, { traces: [{ invokes: [{ tokens: [1] }] }, { invokes: [] }] }),
    (e: unknown) =>
      e instanceof RequestError &&
      e.code === RequestErrorCode.noInvokes &&
      e.message.startsWith('trace 1:') &&
      e.details?.trace === 1,
  );
});
