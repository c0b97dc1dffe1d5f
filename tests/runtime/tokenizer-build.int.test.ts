// A model's tokenizer is built on its first encode or decode (gpu-agent/runtime/load/tokenizer.ts): loading a model
// or computing its manifest builds none; models whose tokenizer files are the same share one build; a tokenizer.json
// the library refuses fails the first text that needs it with the file named (MODEL_TOKENIZER_INVALID for a prompt),
// and is not tried again at its cost.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { loadManifestWithRuntime } from '../../catalog/catalog.js';
import {
  loadTokenizer,
  TokenizerLoadError,
  tokenizerBuilds,
  tokenizerFromJson,
} from '../../gpu-agent/runtime/load/tokenizer.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import { RequestError } from '../../gpu-agent/runtime/errors.js';

let tmp: string;
let bundled: string;
before(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-tokenizer-build-'));
  bundled = ensureModel('gpt2-tiny');
});
after(() => rmSync(tmp, { recursive: true, force: true }));

/**
 * A copy of the bundled model's folder whose tokenizer.json is `tokenizer` (default: the bundled one followed by
 * `salt` spaces: the same tokenizer in a file of its own, so that no build from another test is shared).
 */
function modelCopy(name: string, opts: { salt?: number; tokenizer?: string; config?: string } = {}): string {
  const dir = join(tmp, name);
  mkdirSync(dir);
  for (const f of ['model.onnx', 'model.onnx.data', 'config.json']) copyFileSync(join(bundled, f), join(dir, f));
  const json = readFileSync(join(bundled, 'tokenizer.json'), 'utf8');
  writeFileSync(join(dir, 'tokenizer.json'), opts.tokenizer ?? json + ' '.repeat(opts.salt ?? 0));
  writeFileSync(
    join(dir, 'tokenizer_config.json'),
    opts.config ?? readFileSync(join(bundled, 'tokenizer_config.json'), 'utf8'),
  );
  return dir;
}

test('loading a model or computing its manifest builds no tokenizer; the first encode builds it, with the same ids', async () => {
  const dir = modelCopy('lazy', { salt: 1 });
  const before = tokenizerBuilds();
  const manifest = await loadManifestWithRuntime(dir, 'lazy');
  assert.ok(manifest.modules.length > 0);
  const hm = await loadModel(dir, { key: 'lazy' });
  try {
    assert.equal(tokenizerBuilds(), before, 'nothing built by the manifest or the load');
    const ids = hm.tokenizer!.encode('Hello world, lazily');
    assert.equal(tokenizerBuilds(), before + 1);
    const eager = tokenizerFromJson(readFileSync(join(bundled, 'tokenizer.json'), 'utf8'));
    assert.deepEqual(ids, eager.encode('Hello world, lazily'));
    assert.equal(hm.tokenizer!.decode(ids), 'Hello world, lazily');
    // A prompt is encoded by the same build.
    const start = hm.prepare({ invokes: [{ prompt: 'Hello world, lazily', block: 'async () => 1' }] });
    assert.deepEqual(start.invokes[0]!.tokens, ids);
    assert.equal(tokenizerBuilds(), before + 2, 'one more: tokenizerFromJson above');
  } finally {
    await hm.close();
  }
});

test('tokenizers whose files are the same share one build; another config is another build', () => {
  const a = loadTokenizer(modelCopy('same-a', { salt: 2 }))!;
  const b = loadTokenizer(modelCopy('same-b', { salt: 2 }))!;
  const c = loadTokenizer(modelCopy('other-config', { salt: 2, config: '{"model_max_length": 64}' }))!;
  const before = tokenizerBuilds();
  a.build();
  b.build();
  assert.equal(tokenizerBuilds(), before + 1, 'the second load of the same files reuses the first build');
  assert.deepEqual(b.encode('shared'), a.encode('shared'));
  c.build();
  assert.equal(tokenizerBuilds(), before + 2);
});

test('a tokenizer.json the library refuses: the load succeeds, the first use fails naming the file, and only once at its cost', async () => {
  const dir = modelCopy('broken', { tokenizer: '{"model": {"type": "NoSuchModel"}}' });
  const tok = loadTokenizer(dir)!;
  const before = tokenizerBuilds();
  const first = (() => {
    try {
      tok.encode('x');
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  assert.ok(first instanceof TokenizerLoadError, String(first));
  assert.equal(first.file, join(dir, 'tokenizer.json'));
  assert.match(first.message, /tokenizer\.json does not load as a tokenizer: /);
  assert.throws(
    () => tok.decode([1]),
    (e: unknown) => e === first,
  );
  assert.throws(
    () => tok.build(),
    (e: unknown) => e === first,
  );
  assert.equal(tokenizerBuilds(), before + 1, 'tried once');

  // A text prompt on a model served from that folder is the model's fault, with a code of its own.
  const hm = await loadModel(dir, { key: 'broken' });
  try {
    assert.throws(
      () => hm.prepare({ invokes: [{ prompt: 'Hello', block: 'async () => 1' }] }),
      (e: unknown) =>
        e instanceof RequestError &&
        e.code === 'MODEL_TOKENIZER_INVALID' &&
        e.httpStatus === 500 &&
        /model broken: .*tokenizer\.json does not load as a tokenizer.*send token ids/.test(e.message),
    );
    // Token ids need no tokenizer.
    assert.deepEqual(hm.prepare({ invokes: [{ tokens: [1, 2], block: 'async () => 1' }] }).invokes[0]!.tokens, [1, 2]);
  } finally {
    await hm.close();
  }
});
