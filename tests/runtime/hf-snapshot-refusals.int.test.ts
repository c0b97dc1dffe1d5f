// A Hugging Face snapshot folder the graph builder cannot serve as it is is refused at load with a code, the file
// and the fix — never served as a different model: a shard the index names is missing, the index names a tensor its
// shard lacks, a tensor the config needs is absent, an unknown model_type or option (a rope scaling kind, an
// activation, sliding-window attention), weights in another dtype than config.json says, a truncated file, a shape
// the config does not imply. After the refusals the same folder, intact, still loads.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  copyFileSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  truncateSync,
  writeFileSync,
  unlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadModel, ModelLoadError } from '../../gpu-agent/runtime/index.js';
import { hfDir } from './hf-fixtures.js';

const temp: string[] = [];
after(() => {
  for (const d of temp) rmSync(d, { recursive: true, force: true });
});

function copyOf(src: string, edit: (dir: string) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-bad-snapshot-'));
  temp.push(dir);
  for (const f of readdirSync(src)) copyFileSync(join(src, f), join(dir, f));
  edit(dir);
  return dir;
}

function editJson(dir: string, file: string, f: (j: Record<string, unknown>) => void): void {
  const j = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>;
  f(j);
  writeFileSync(join(dir, file), JSON.stringify(j));
}

/** The refusal has `code`, names `file` (message and details) and says how to fix it. */
function refused(code: string, file: string, pattern?: RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof ModelLoadError, `expected a coded refusal, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    const details = (e as { details?: Record<string, unknown> }).details ?? {};
    assert.equal(details.file, file, `details name ${file}: ${JSON.stringify(details)}`);
    assert.ok(e.message.startsWith(`${file}:`), e.message);
    assert.match(
      e.message,
      /; (download|save|check|the builder|set|it must|export|sliding|cross)/,
      `says the fix: ${e.message}`,
    );
    if (pattern) assert.match(e.message, pattern);
    return true;
  };
}

const sharded = join(hfDir, 'llama', 'snapshot-sharded');
const llama = join(hfDir, 'llama', 'snapshot');
const gpt2 = join(hfDir, 'gpt2', 'snapshot');

test('sharded: a shard the index names is missing, or the index names a tensor its shard does not hold', async () => {
  const missing = copyOf(sharded, (d) => unlinkSync(join(d, 'model-00003-of-00006.safetensors')));
  await assert.rejects(loadModel(missing), refused('SNAPSHOT_SHARD_MISSING', 'model-00003-of-00006.safetensors'));
  const ghost = copyOf(sharded, (d) =>
    editJson(d, 'model.safetensors.index.json', (j) => {
      (j.weight_map as Record<string, string>)['model.layers.0.mlp.ghost.weight'] = 'model-00001-of-00006.safetensors';
    }),
  );
  await assert.rejects(
    loadModel(ghost),
    refused('SNAPSHOT_TENSOR_MISSING', 'model-00001-of-00006.safetensors', /model\.layers\.0\.mlp\.ghost\.weight/),
  );
  const dropped = copyOf(sharded, (d) =>
    editJson(d, 'model.safetensors.index.json', (j) => {
      delete (j.weight_map as Record<string, string>)['model.layers.1.mlp.up_proj.weight'];
    }),
  );
  await assert.rejects(
    loadModel(dropped),
    refused('SNAPSHOT_TENSOR_MISSING', 'model.safetensors.index.json', /model\.layers\.1\.mlp\.up_proj\.weight/),
  );
  const outside = copyOf(sharded, (d) =>
    editJson(d, 'model.safetensors.index.json', (j) => {
      (j.weight_map as Record<string, string>)['model.norm.weight'] = '../../etc/passwd';
    }),
  );
  await assert.rejects(loadModel(outside), refused('SNAPSHOT_INDEX_INVALID', 'model.safetensors.index.json'));
});

test('an unknown model_type or option is refused at load, naming the field', async () => {
  const neox = copyOf(gpt2, (d) =>
    editJson(d, 'config.json', (c) => {
      c.model_type = 'gpt_neox';
    }),
  );
  await assert.rejects(
    loadModel(neox),
    refused('SNAPSHOT_CONFIG_UNSUPPORTED', 'config.json', /model_type = "gpt_neox"/),
  );
  const yarn = copyOf(llama, (d) =>
    editJson(d, 'config.json', (c) => {
      c.rope_parameters = { rope_type: 'yarn', factor: 4, rope_theta: 10000 };
    }),
  );
  await assert.rejects(
    loadModel(yarn),
    (e: unknown) =>
      refused('SNAPSHOT_CONFIG_UNSUPPORTED', 'config.json', /rope_parameters\.rope_type = "yarn"/)(e) &&
      (e as { details: { field: string } }).details.field === 'rope_parameters.rope_type',
  );
  const act = copyOf(gpt2, (d) =>
    editJson(d, 'config.json', (c) => {
      c.activation_function = 'swish';
    }),
  );
  await assert.rejects(loadModel(act), refused('SNAPSHOT_CONFIG_UNSUPPORTED', 'config.json', /activation_function/));
  const window = copyOf(llama, (d) =>
    editJson(d, 'config.json', (c) => {
      c.model_type = 'mistral';
      c.sliding_window = 16;
    }),
  );
  await assert.rejects(loadModel(window), refused('SNAPSHOT_CONFIG_UNSUPPORTED', 'config.json', /sliding_window = 16/));
  const bf16 = copyOf(llama, (d) =>
    editJson(d, 'config.json', (c) => {
      c.dtype = 'bfloat16';
    }),
  );
  await assert.rejects(loadModel(bf16), refused('SNAPSHOT_CONFIG_UNSUPPORTED', 'config.json', /dtype = "bfloat16"/));
});

test('weights in another dtype than config.json says, or shaped otherwise than it implies', async () => {
  const half = copyOf(llama, (d) =>
    editJson(d, 'config.json', (c) => {
      c.dtype = 'float16';
    }),
  );
  await assert.rejects(
    loadModel(half),
    refused('SNAPSHOT_DTYPE_MISMATCH', 'model.safetensors', /is F32 but config\.json says .*float16/),
  );
  const vocab = copyOf(gpt2, (d) =>
    editJson(d, 'config.json', (c) => {
      c.vocab_size = 1024;
    }),
  );
  await assert.rejects(
    loadModel(vocab),
    refused('SNAPSHOT_SHAPE_MISMATCH', 'model.safetensors', /transformer\.wte\.weight/),
  );
});

test('a truncated safetensors file, or a header that is not JSON', async () => {
  const cut = copyOf(llama, (d) => truncateSync(join(d, 'model.safetensors'), 100_000));
  await assert.rejects(
    loadModel(cut),
    refused('SNAPSHOT_FILE_TRUNCATED', 'model.safetensors', /needs bytes up to \d+, the file has 100000/),
  );
  const tiny = copyOf(llama, (d) => truncateSync(join(d, 'model.safetensors'), 4));
  await assert.rejects(loadModel(tiny), refused('SNAPSHOT_FILE_TRUNCATED', 'model.safetensors'));
  const garbage = copyOf(llama, (d) => {
    const b = readFileSync(join(d, 'model.safetensors'));
    b.fill(0x41, 8, 40);
    writeFileSync(join(d, 'model.safetensors'), b);
  });
  await assert.rejects(loadModel(garbage), refused('SNAPSHOT_FILE_INVALID', 'model.safetensors'));
  const none = copyOf(llama, (d) => unlinkSync(join(d, 'model.safetensors')));
  await assert.rejects(loadModel(none), (e: unknown) => (e as ModelLoadError).code === 'MODEL_NOT_FOUND');
});

test('after the refusals the intact snapshot loads and answers', async () => {
  const hm = await loadModel(llama, { key: 'llama-snapshot-intact' });
  try {
    assert.ok(hm.manifest().modules.some((m) => m.path === 'model.layers.1.self_attn'));
  } finally {
    await hm.close();
  }
});
