// The catalog over real model folders: the bundled gpt2-tiny, a key=dir copy of it, a broken folder; weights
// bytes from the ONNX file equal the runtime's; the manifest is computed once (by loading the model) and then
// read from the JSON cache, also by a fresh catalog; a changed model file invalidates the cache.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, mkdirSync, rmSync, utimesSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  FabricModelCatalog,
  loadManifestWithRuntime,
  catalogConfigFromEnv,
  parseModelList,
  withBundled,
  onDemandFromCatalog,
  type ManifestLoader,
} from '../../catalog/index.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { isFabricError } from '../../protocol/errors.js';

function counting(): { loader: ManifestLoader; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    loader: (dir, key) => {
      calls.push(key);
      return loadManifestWithRuntime(dir, key);
    },
  };
}

const code = (c: string) => (e: unknown) => isFabricError(e) && e.code === c;

describe('model catalog', () => {
  let tmp: string;
  let tiny: string;
  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'ndif-catalog-'));
    tiny = ensureModel('gpt2-tiny');
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it("serves the configured models with the runtime's weights bytes and computes each manifest once", async () => {
    const cacheDir = join(tmp, 'cache-a');
    const copy = join(tmp, 'copy');
    cpSync(tiny, copy, { recursive: true });
    const { loader, calls } = counting();
    const catalog = await FabricModelCatalog.open(
      { models: parseModelList(`gpt2-tiny,tiny-copy=${copy}`), cacheDir },
      { loadManifest: loader },
    );
    assert.deepEqual(
      catalog.list().map((m) => m.key),
      ['gpt2-tiny', 'tiny-copy'],
    );
    assert.equal(catalog.get('gpt2-small'), undefined);
    const hm = await loadModel(tiny, { key: 'gpt2-tiny' });
    try {
      const entry = catalog.get('gpt2-tiny')!;
      assert.equal(entry.weightsBytes, hm.weightsBytes);
      assert.equal(entry.dir, tiny);
      assert.match(entry.description, /2 layers/);
      assert.deepEqual(entry.defaults, { gpus: 1, dtype: 'float32' });
      const [m1, m2] = await Promise.all([catalog.manifest('gpt2-tiny'), catalog.manifest('gpt2-tiny')]);
      assert.deepEqual(m1, hm.manifest());
      assert.equal(m2, m1);
      const resolved = await catalog.manifest('gpt2-tiny', { batch: 2, sequence: 7 });
      assert.deepEqual(resolved, hm.manifest(2, 7));
      assert.deepEqual(calls, ['gpt2-tiny']);
      assert.equal((await catalog.manifest('tiny-copy')).model, 'tiny-copy');
      assert.deepEqual(calls, ['gpt2-tiny', 'tiny-copy']);
    } finally {
      await hm.close();
    }

    // A fresh catalog (another process) reads weights and manifests from the JSON cache: no model load.
    const again = counting();
    const second = await FabricModelCatalog.open(
      { models: parseModelList(`gpt2-tiny,tiny-copy=${copy}`), cacheDir },
      { loadManifest: again.loader },
    );
    assert.equal((await second.manifest('gpt2-tiny')).model, 'gpt2-tiny');
    assert.deepEqual(again.calls, []);

    // A changed model file is another fingerprint: computed again.
    const later = new Date(Date.now() + 5000);
    utimesSync(join(copy, 'model.onnx'), later, later);
    const third = await FabricModelCatalog.open(
      { models: parseModelList(`tiny-copy=${copy}`), cacheDir },
      { loadManifest: again.loader },
    );
    await third.manifest('tiny-copy');
    assert.deepEqual(again.calls, ['tiny-copy']);
    assert.ok(readdirSync(cacheDir).some((f) => f.startsWith('tiny-copy-')));
  });

  it("checks a folder's tokenizer once per folder stamp: a pass is cached across catalogs, a failure is not", async () => {
    const cacheDir = join(tmp, 'cache-tok');
    const copy = join(tmp, 'tok-copy');
    cpSync(tiny, copy, { recursive: true });
    const open = () => FabricModelCatalog.open({ models: parseModelList(`tok=${copy}`), cacheDir });
    const ran: string[] = [];
    const first = await open();
    first.checkTokenizerOnce('tok', copy, () => ran.push('first'));
    first.checkTokenizerOnce('tok', copy, () => ran.push('again'));
    // Another process's catalog over the same cache folder.
    (await open()).checkTokenizerOnce('tok', copy, () => ran.push('second catalog'));
    assert.deepEqual(ran, ['first'], 'passed once, then cached');

    // Another key over the same folder is checked on its own; a failing check throws and records nothing.
    const refused = new Error('the tokenizer does not load');
    assert.throws(
      () =>
        first.checkTokenizerOnce('other', copy, () => {
          throw refused;
        }),
      (e) => e === refused,
    );
    first.checkTokenizerOnce('other', copy, () => ran.push('other after a failure'));
    assert.deepEqual(ran, ['first', 'other after a failure']);

    // A changed tokenizer.json is another folder stamp: checked again.
    const later = new Date(Date.now() + 5000);
    utimesSync(join(copy, 'tokenizer.json'), later, later);
    first.checkTokenizerOnce('tok', copy, () => ran.push('changed'));
    assert.deepEqual(ran, ['first', 'other after a failure', 'changed']);
  });

  it('refuses unknown keys, bad shapes and unreadable folders with codes', async () => {
    const catalog = await FabricModelCatalog.open({
      models: parseModelList('gpt2-tiny'),
      cacheDir: join(tmp, 'cache-b'),
    });
    await assert.rejects(
      catalog.manifest('gpt9'),
      (e: unknown) =>
        code('CATALOG_MODEL_UNKNOWN')(e) && /gpt2-tiny/.test(String((e as Error & { hint?: string }).hint)),
    );
    await assert.rejects(catalog.manifest('gpt2-tiny', { batch: 0, sequence: 4 }), code('CATALOG_SHAPE_INVALID'));
    const empty = join(tmp, 'empty');
    mkdirSync(empty);
    await assert.rejects(
      FabricModelCatalog.open({ models: parseModelList(`broken=${empty}`), cacheDir: join(tmp, 'cache-b') }),
      code('CATALOG_MODEL_UNREADABLE'),
    );
    const garbage = join(tmp, 'garbage');
    cpSync(tiny, garbage, { recursive: true });
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(garbage, 'model.onnx'), Buffer.from('not a protobuf at all, really not'));
    await assert.rejects(
      FabricModelCatalog.open({ models: parseModelList(`garbage=${garbage}`), cacheDir: join(tmp, 'cache-b') }),
      code('CATALOG_MODEL_UNREADABLE'),
    );
  });

  it('reads NDIF_MODELS, always adds the bundled model where asked, and gives on-demand settings', async () => {
    assert.deepEqual(catalogConfigFromEnv({}).models, [{ key: 'gpt2-tiny', bundled: 'gpt2-tiny' }]);
    assert.deepEqual(catalogConfigFromEnv({ NDIF_MODELS: 'gpt2-small-random' }).models, [
      { key: 'gpt2-small-random', bundled: 'gpt2-small-random' },
    ]);
    const c = withBundled(
      catalogConfigFromEnv({ NDIF_MODELS: 'mine=/models/mine', NDIF_CATALOG_CACHE: '/tmp/x' }),
      'gpt2-tiny',
    );
    assert.deepEqual(
      c.models.map((m) => m.key),
      ['gpt2-tiny', 'mine'],
    );
    assert.equal(c.cacheDir, '/tmp/x');
    assert.throws(() => parseModelList('llama'), code('CATALOG_CONFIG_INVALID'));
    assert.throws(() => parseModelList('a=/x,a=/y'), code('CATALOG_CONFIG_INVALID'));
    assert.throws(() => parseModelList('bad key=/x'), code('CATALOG_CONFIG_INVALID'));
    assert.throws(() => parseModelList('k='), code('CATALOG_CONFIG_INVALID'));
    const catalog = await FabricModelCatalog.open({
      models: parseModelList('gpt2-tiny'),
      cacheDir: join(tmp, 'cache-c'),
    });
    const onDemand = onDemandFromCatalog(catalog);
    assert.deepEqual(onDemand('gpt2-tiny'), {
      settings: { weightsBytes: catalog.get('gpt2-tiny')!.weightsBytes, gpus: 1, dtype: 'float32' },
    });
    assert.equal(onDemand('other'), undefined);
  });
});
