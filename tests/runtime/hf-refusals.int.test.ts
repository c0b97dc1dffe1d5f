// Models the runtime cannot serve as asked are refused with a code naming what is wrong, never a crash or a wrong
// answer: a dynamo export with every dim fixed by its batch-1 example, a truncated or corrupt model.onnx, missing
// or truncated external data, an op onnxruntime does not have, an input the runtime cannot feed; and requests a
// model cannot answer: prompts of different lengths on an export without attention_mask (GPT-2 exported with
// input_ids only), generation on an encoder. After each refusal the runtime still serves.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel, ModelLoadError, RequestError } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import { decodeModel, encodeModel } from '../../gpu-agent/runtime/onnx/codec.js';
import type { ModelProto } from '../../gpu-agent/runtime/onnx/types.js';
import { fixtureDir, run } from './tiny-model.js';
import { hfDir } from './hf-fixtures.js';

const temp: string[] = [];
const models: HostedModel[] = [];
after(async () => {
  await Promise.all(models.map((m) => m.close()));
  for (const d of temp) rmSync(d, { recursive: true, force: true });
});

/** A copy of a fixture model folder, changed by `edit` (files by name). */
function copyOf(src: string, edit?: (dir: string) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-bad-model-'));
  temp.push(dir);
  for (const f of readdirSync(src)) copyFileSync(join(src, f), join(dir, f));
  edit?.(dir);
  return dir;
}

function editGraph(dir: string, f: (m: ModelProto) => void): void {
  const m = decodeModel(readFileSync(join(dir, 'model.onnx')));
  f(m);
  writeFileSync(join(dir, 'model.onnx'), encodeModel(m));
}

function refused(code: string, pattern?: RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof ModelLoadError || e instanceof RequestError, `expected a coded refusal, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    if (pattern) assert.match(e.message, pattern);
    return true;
  };
}

const bert = join(hfDir, 'bert', 'torchscript');

test('a dynamo export traced at batch 1 without dynamic_shapes: MODEL_STATIC_DIMS says how to export', async () => {
  await assert.rejects(
    loadModel(join(hfDir, 'gpt2', 'dynamo-static')),
    refused('MODEL_STATIC_DIMS', /fixed batch 1 and sequence 8.*batch >= 2 example and dynamic_shapes/),
  );
});

test('a truncated or corrupt model.onnx: MODEL_INVALID naming the file', async () => {
  const truncated = copyOf(bert, (d) => truncateSync(join(d, 'model.onnx'), 100_000));
  await assert.rejects(
    loadModel(truncated),
    refused('MODEL_INVALID', /model\.onnx is not a readable ONNX model.*truncated/),
  );
  const corrupt = copyOf(bert, (d) =>
    writeFileSync(join(d, 'model.onnx'), Buffer.from('this is not a protobuf at all, just text'.repeat(50))),
  );
  await assert.rejects(loadModel(corrupt), refused('MODEL_INVALID'));
});

test('external data missing or truncated: MODEL_EXTERNAL_DATA_MISSING naming the file', async () => {
  const src = join(hfDir, 'llama', 'dynamo');
  const missing = copyOf(src, (d) => rmSync(join(d, 'model.onnx.data')));
  await assert.rejects(
    loadModel(missing),
    refused('MODEL_EXTERNAL_DATA_MISSING', /stored in model\.onnx\.data, which is not in/),
  );
  const short = copyOf(src, (d) => truncateSync(join(d, 'model.onnx.data'), 1000));
  await assert.rejects(
    loadModel(short),
    refused('MODEL_EXTERNAL_DATA_MISSING', /model\.onnx\.data, which has 1000.*truncated/),
  );
});

test('an op onnxruntime does not have: MODEL_OP_UNSUPPORTED naming the op and the node', async () => {
  const custom = copyOf(bert, (d) =>
    editGraph(d, (m) => {
      const n = m.graph!.node!.find((x) => x.op_type === 'Erf')!;
      n.domain = 'com.example';
      n.op_type = 'FastGelu';
    }),
  );
  await assert.rejects(
    loadModel(custom),
    refused(
      'MODEL_OP_UNSUPPORTED',
      /node "\/encoder\/layer\.0\/intermediate\/intermediate_act_fn\/Erf" uses op com\.example:FastGelu/,
    ),
  );
  const unknown = copyOf(bert, (d) =>
    editGraph(d, (m) => {
      m.graph!.node!.find((x) => x.op_type === 'Erf')!.op_type = 'Erff';
    }),
  );
  await assert.rejects(
    loadModel(unknown),
    refused('MODEL_OP_UNSUPPORTED', /uses op Erff.*no such op is registered at opset 17/),
  );
});

test('an input the runtime cannot feed: MODEL_INPUT_UNSUPPORTED listing what it feeds', async () => {
  const dir = copyOf(bert, (d) =>
    editGraph(d, (m) => {
      for (const v of m.graph!.input!) if (v.name === 'token_type_ids') v.name = 'pixel_values';
      for (const n of m.graph!.node!)
        n.input = (n.input ?? []).map((i) => (i === 'token_type_ids' ? 'pixel_values' : i));
    }),
  );
  await assert.rejects(
    loadModel(dir),
    refused(
      'MODEL_INPUT_UNSUPPORTED',
      /pixel_values is not an input the runtime feeds.*feeds input_ids, attention_mask/,
    ),
  );
});

test('GPT-2 exported with input_ids only: prompts of different lengths are refused, equal lengths served', async () => {
  const hm = await loadModel(fixtureDir, { key: 'gpt2-ids-only' });
  models.push(hm);
  assert.equal(hm.manifest().padding, 'none');
  await assert.rejects(
    run(hm, { invokes: [{ tokens: [1, 2, 3, 4] }, { tokens: [5, 6] }] }),
    refused('BATCH_PADDING_UNSUPPORTED', /no attention_mask input.*\(4, 2 tokens\)/),
  );
  const r = await run(hm, {
    invokes: [
      { tokens: [1, 2, 3], block: 'async (m) => await m.output' },
      { tokens: [4, 5, 6], block: 'async (m) => await m.output' },
    ],
  });
  assert.equal(r.invokes.length, 2);
});

test('generation on an encoder (no language-model head): MODEL_NOT_GENERATIVE; a forward pass still runs', async () => {
  const hm = await loadModel(bert, { key: 'bert' });
  models.push(hm);
  assert.equal(hm.manifest().logits, null);
  await assert.rejects(
    run(hm, { invokes: [{ prompt: 'Hello world' }], newTokens: 2 }),
    refused('MODEL_NOT_GENERATIVE', /no language-model head \(its outputs are last_hidden_state, pooler_output\)/),
  );
  const r = await run(hm, { invokes: [{ prompt: 'Hello world', block: 'async (m) => (await m.outputs)[1].shape' }] });
  assert.deepEqual(r.invokes[0]!.result.tree, [1, 64]);
});
