// Persistent edits end to end (nnsight's model.edit()), through the real processes (`npm start`: the embedded fabric
// and its GPU agent child) and the real `ndif` bin: an edit registered with `ndif edits add` is listed, a request to
// its variant `gpt2-tiny@zero-mlp0` gives bit for bit what the same interventions written inline in the block give on
// the plain model (and the plain model is untouched by it), `ndif why` and `ndif audit` name the edit and its source
// sha256, and once removed (`ndif edits rm`) a submission to the variant is refused API_UNKNOWN_VARIANT.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type EmbeddedFabric, startEmbeddedFabric, stopEmbeddedFabric } from '../../bench/_embedded-fabric.js';
import { Fabric, FabricHttpError, type Tensor } from '../../client/sdk/index.js';
import { testCatalogCache } from '../support/catalog-cache.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const distDir = resolve(here, '..', '..');
const repoRoot = resolve(distDir, '..');
const BIN = join(repoRoot, 'client', 'cli', 'bin.mjs');

let tmp: string;
let fabric: EmbeddedFabric | undefined;
let url: string;
let ndif: Fabric;

const PROMPT = 'The Eiffel Tower is in';
const EDIT = `async (m) => {
  const h = await m.transformer.h[0].mlp.output;
  m.transformer.h[0].mlp.output = h.mul(0);
}`;
const USER = `async (m) => ({ h: await m.transformer.h[1].output, logits: await m.output })`;
const INLINE = `async (m) => {
  const h0 = await m.transformer.h[0].mlp.output;
  m.transformer.h[0].mlp.output = h0.mul(0);
  return { h: await m.transformer.h[1].output, logits: await m.output };
}`;

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, NDIF_DIST: basename(distDir), NDIF_URL: url, NDIF_API_KEY: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, out, err };
}

const bits = (t: Tensor) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-edits-e2e-'));
  fabric = await startEmbeddedFabric(join(tmp, 'data'), {
    NDIF_CATALOG_CACHE: testCatalogCache(join(tmp, 'catalog')),
    NDIF_MODELS: 'gpt2-tiny',
    NDIF_AGENT_GPUS: '1x16GiB',
    NDIF_AGENT_RAM: '8GiB',
    NDIF_LOG_LEVEL: process.env.NDIF_TEST_LOG_LEVEL ?? 'warn',
  });
  url = fabric.url;
  ndif = new Fabric({ url, progress: false, onLog: null });
});

after(async () => {
  ndif?.close();
  await stopEmbeddedFabric(fabric);
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('persistent edits end to end', () => {
  it('register → the variant runs the edit (as inline interventions do) → why and audit name it → remove → refused', async () => {
    const file = join(tmp, 'zero-mlp0.js');
    writeFileSync(file, EDIT);
    const fingerprint = createHash('sha256').update(EDIT, 'utf8').digest('hex');
    const add = await cli(['edits', 'add', 'gpt2-tiny', 'zero-mlp0', file]);
    assert.equal(add.code, 0, `${add.out}\n${add.err}\n${fabric?.log()}`);
    assert.match(add.out, new RegExp(`^gpt2-tiny@zero-mlp0 registered \\(private\\): sha256 ${fingerprint}$`, 'm'));
    const ls = await cli(['edits', 'ls', 'gpt2-tiny']);
    assert.equal(ls.code, 0, ls.err);
    assert.match(ls.out, new RegExp(`^gpt2-tiny@zero-mlp0 +private +\\S+ +${fingerprint.slice(0, 12)}…`, 'm'));

    type Out = { h: Tensor; logits: Tensor };
    const edited = (await ndif.trace('gpt2-tiny@zero-mlp0', PROMPT, USER, { requestId: 'with-edit' })) as Out;
    const inline = (await ndif.trace('gpt2-tiny', PROMPT, INLINE)) as Out;
    const plain = (await ndif.trace('gpt2-tiny', PROMPT, USER)) as Out;
    for (const k of ['h', 'logits'] as const) {
      assert.ok(bits(edited[k]).equals(bits(inline[k])), `${k}: the variant equals the interventions written inline`);
      assert.ok(!bits(edited[k]).equals(bits(plain[k])), `${k}: the plain model does not run the edit`);
    }

    const why = await cli(['why', 'with-edit']);
    assert.equal(why.code, 0, why.err);
    assert.match(
      why.out,
      new RegExp(`gpt2-tiny@zero-mlp0 \\(edit zero-mlp0, source sha256 ${fingerprint.slice(0, 12)}…`),
    );
    const audit = await cli(['audit', '--model', 'gpt2-tiny', '--type', 'RequestReceived']);
    assert.equal(audit.code, 0, audit.err);
    assert.match(audit.out, /gpt2-tiny@zero-mlp0 \(edit zero-mlp0/);

    const rm = await cli(['edits', 'rm', 'gpt2-tiny@zero-mlp0']);
    assert.equal(rm.code, 0, rm.err);
    assert.match(rm.out, /^gpt2-tiny@zero-mlp0 removed$/m);
    await assert.rejects(ndif.trace('gpt2-tiny@zero-mlp0', PROMPT, USER), (e: unknown) => {
      assert.ok(e instanceof FabricHttpError, String(e));
      assert.equal(e.code, 'API_UNKNOWN_VARIANT');
      assert.match(e.message, /removed is gone/);
      return true;
    });
    await assert.rejects(ndif.trace('gpt2-tiny@never-registered', PROMPT, USER), /API_UNKNOWN_VARIANT|no edit/);
    const again = (await ndif.trace('gpt2-tiny', PROMPT, USER)) as Out;
    assert.ok(bits(again.logits).equals(bits(plain.logits)), 'the plain model is as it was');
  });
});
