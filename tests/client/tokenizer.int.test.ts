// The SDK's client-side tokenizer against a real fabric in this process: the ids are the fabric's own for the same
// text (a block returns ctx.tokens), the bundle is fetched once per client, cached on disk and revalidated with
// If-None-Match (304), a damaged cache file is replaced, and an unknown model or a model whose tokenizer.json has
// gone from its folder (registration requires one) gets a clear error.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { Fabric, FabricHttpError } from '../../client/sdk/index.js';
import { loadTokenizer } from '../../gpu-agent/runtime/load/tokenizer.js';
import { tokenizerBundleSha256 } from '../../protocol/tokenizer-bundle.js';
import { startInProcessFabric, type InProcessFabric } from './fabric-harness.js';

const TEXTS = ['The Eiffel Tower is in', ' Paris, naïve café — 東京 🚀', 'a<|endoftext|>b', '   spaces\tand\nlines '];

let fab: InProcessFabric;
let cacheDir: string;
let bare: string;

before(async () => {
  bare = mkdtempSync(join(tmpdir(), 'ndif-notok-'));
  cpSync(ensureModel('gpt2-tiny'), bare, { recursive: true });
  fab = await startInProcessFabric({ models: `gpt2-tiny,bare=${bare}` });
  rmSync(join(bare, 'tokenizer.json'));
  cacheDir = mkdtempSync(join(tmpdir(), 'ndif-sdk-cache-'));
});
after(async () => {
  await fab?.close();
  rmSync(cacheDir, { recursive: true, force: true });
  rmSync(bare, { recursive: true, force: true });
});

const client = (dir: string | false = cacheDir) =>
  new Fabric({ url: fab.url, progress: false, onLog: null, cacheDir: dir });

it('encodes as the fabric does and decodes back, with no round trip after the first', async () => {
  const ndif = client();
  try {
    const tok = await ndif.tokenizer('gpt2-tiny');
    assert.equal(tok.source, 'fabric');
    assert.equal(await ndif.tokenizer('gpt2-tiny'), tok, 'the same object: fetched once per client');
    const server = loadTokenizer(ensureModel('gpt2-tiny'))!;
    for (const text of TEXTS) {
      const ids = tok.encode(text);
      assert.deepEqual(ids, server.encode(text), text);
      assert.equal(tok.decode(ids), text);
    }
    // What a block sees as the prompt's tokens, on the fabric, for the text sent as text.
    const onFabric = await ndif.trace<number[][]>(
      'gpt2-tiny',
      TEXTS[1]!,
      async (_m: unknown, ctx: { tokens: number[][] }) => ctx.tokens,
    );
    assert.deepEqual(onFabric.flat(), tok.encode(TEXTS[1]!));
    const dir = ensureModel('gpt2-tiny');
    assert.equal(
      tok.sha256,
      await tokenizerBundleSha256(
        readFileSync(join(dir, 'tokenizer.json'), 'utf8'),
        readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'),
      ),
    );
  } finally {
    ndif.close();
  }
});

it('reuses the disk cache once the fabric confirms it (304), and replaces a damaged copy', async () => {
  const files = readdirSync(join(cacheDir, 'tokenizers')).filter((f) => f.endsWith('.json'));
  assert.equal(files.length, 1, 'one cached bundle');
  const second = client();
  const again = await second.tokenizer('gpt2-tiny');
  assert.equal(again.source, 'cache');
  assert.deepEqual(again.encode(TEXTS[0]!), loadTokenizer(ensureModel('gpt2-tiny'))!.encode(TEXTS[0]!));
  second.close();

  writeFileSync(
    join(cacheDir, 'tokenizers', files[0]!),
    '{"model":"gpt2-tiny","sha256":"00","tokenizer":"{}","config":null}',
  );
  const third = client();
  const fresh = await third.tokenizer('gpt2-tiny');
  assert.equal(fresh.source, 'fabric', 'a copy that does not match its hash is not used');
  third.close();
  const fourth = client();
  assert.equal((await fourth.tokenizer('gpt2-tiny')).source, 'cache', 'and the replaced file is good again');
  fourth.close();
});

it('keeps nothing on disk with cacheDir: false', async () => {
  const empty = mkdtempSync(join(tmpdir(), 'ndif-sdk-nocache-'));
  const prev = process.env.NDIF_CACHE_DIR;
  process.env.NDIF_CACHE_DIR = empty;
  try {
    const ndif = client(false);
    assert.equal((await ndif.tokenizer('gpt2-tiny')).source, 'fabric');
    ndif.close();
    assert.equal(existsSync(join(empty, 'tokenizers')), false);
  } finally {
    if (prev === undefined) delete process.env.NDIF_CACHE_DIR;
    else process.env.NDIF_CACHE_DIR = prev;
    rmSync(empty, { recursive: true, force: true });
  }
});

it('refuses an unknown model and a model without tokenizer.json, and a later call tries again', async () => {
  const ndif = client(false);
  try {
    await assert.rejects(
      ndif.tokenizer('gpt5'),
      (e: unknown) =>
        e instanceof FabricHttpError &&
        e.code === 'API_UNKNOWN_MODEL' &&
        /this fabric serves gpt2-tiny, bare/.test(e.message),
    );
    await assert.rejects(
      ndif.tokenizer('bare'),
      (e: unknown) =>
        e instanceof FabricHttpError &&
        e.status === 404 &&
        e.code === 'API_NO_TOKENIZER' &&
        /send token ids/.test(e.hint ?? ''),
    );
    await assert.rejects(ndif.tokenizer('bare'), /no tokenizer/, 'not remembered as a failure');
  } finally {
    ndif.close();
  }
});
