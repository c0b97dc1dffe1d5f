// Uploaded tensors end to end, through the real processes (`npm start`: the embedded fabric, its control plane and
// its GPU agent child) over real HTTP: a tensor uploaded once (PUT /tensors/:name, raw bytes) is read by blocks as
// `ctx.tensors.<name>` in trusted and sandboxed runs, bit for bit what the same values sent inline give, and kept
// across a session's traces; deleted, it is refused (API_UNKNOWN_TENSOR). A 256 MiB upload streams through the
// control plane (its RSS grows by far less than the tensor) and
// reaches a sandboxed block within the runner's default 512 MiB memory cap.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type EmbeddedFabric, startEmbeddedFabric, stopEmbeddedFabric } from '../../bench/_embedded-fabric.js';
import { Fabric, FabricHttpError, Tensor } from '../../client/sdk/index.js';
import { testCatalogCache } from '../support/catalog-cache.js';

let tmp: string;
let fabric: EmbeddedFabric | undefined;
let url: string;
let ndif: Fabric;

const PROMPT = 'The Eiffel Tower is in';
const bits = (t: Tensor) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);

/** A float32 tensor of `n` values with varied bits (no value repeats a simple pattern). */
function probe(n: number, seed: number): Tensor {
  const v = new Float32Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    v[i] = (x / 2147483648 - 0.5) * 3;
  }
  return Tensor.from(v, [n]);
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-tensors-e2e-'));
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

/** The control plane process: the supervisor's child running control-plane-process.js. */
function controlPlanePid(): number {
  const cp = fabric?.controlPlanePid();
  assert.ok(cp !== undefined, 'no control plane under the fabric process');
  return cp;
}

const rssBytes = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

describe('uploaded tensors end to end', () => {
  let width = 0;
  const SWAP = `async (m, ctx) => {
    const h = await m.transformer.h[0].output;
    m.transformer.h[0].output = h.add(ctx.tensors.bias);
    return { bias: ctx.tensors.bias, logits: await m.output };
  }`;
  const INLINE = `async (m, ctx) => {
    const bias = ctx.Tensor.from(params.bias, [params.bias.length]);
    const h = await m.transformer.h[0].output;
    m.transformer.h[0].output = h.add(bias);
    return { bias, logits: await m.output };
  }`;

  it('upload → a trusted and a sandboxed block read ctx.tensors bit for bit, as the same values sent inline', async () => {
    assert.ok((await ndif.version()).capabilities.includes('tensors'), 'the fabric says it takes uploaded tensors');
    const h = (await ndif.trace('gpt2-tiny', PROMPT, 'async (m) => await m.transformer.h[0].output')) as Tensor;
    width = h.shape[h.shape.length - 1]!;
    const bias = probe(width, 7);
    const up = await ndif.tensors.upload('bias', bias);
    assert.equal(up.name, 'bias');
    assert.deepEqual(up.shape, [width]);
    assert.equal(up.bytes, width * 4);
    assert.deepEqual(
      (await ndif.tensors.list()).map((t) => t.name),
      ['bias'],
    );

    type Out = { bias: Tensor; logits: Tensor };
    const inline = (await ndif.trace('gpt2-tiny', PROMPT, INLINE, {
      params: { bias: Array.from(bias.data as Float32Array) },
    })) as Out;
    const trusted = (await ndif.trace('gpt2-tiny', PROMPT, SWAP, { tensors: ['bias'] })) as Out;
    const sandboxed = (await ndif.trace('gpt2-tiny', PROMPT, SWAP, {
      tensors: ['bias'],
      untrusted: true,
      waitMs: 60_000,
    })) as Out;
    const plain = (await ndif.trace('gpt2-tiny', PROMPT, 'async (m) => ({ logits: await m.output })')) as Out;
    assert.ok(bits(trusted.bias).equals(bits(bias)), 'the block reads the uploaded bytes exactly');
    assert.ok(bits(sandboxed.bias).equals(bits(bias)), 'the sandboxed block reads the uploaded bytes exactly');
    assert.ok(bits(trusted.logits).equals(bits(inline.logits)), 'trusted: as the values sent inline');
    assert.ok(bits(sandboxed.logits).equals(bits(trusted.logits)), 'sandboxed: bit-identical to trusted');
    assert.ok(!bits(plain.logits).equals(bits(trusted.logits)), 'the swap changed the logits');
  });

  it("a session's traces (a sandboxed loop too) all read the request's tensors", async () => {
    const block = `async (m, ctx) => ctx.tensors.bias.sum().item() + ctx.iteration`;
    const sum = (probe(width, 7).sum() as Tensor).item();
    for (const untrusted of [false, true]) {
      const out = (await ndif.session(
        'gpt2-tiny',
        [
          { input: PROMPT, block },
          { input: PROMPT, block, repeat: 3 },
        ],
        { tensors: ['bias'], untrusted, waitMs: 60_000 },
      )) as number[];
      assert.deepEqual(out, [sum, sum + 2], `untrusted=${untrusted}`);
    }
  });

  it('an unknown name is refused at submission with API_UNKNOWN_TENSOR; a deleted tensor is refused afterwards', async () => {
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, 'async (m, ctx) => 1', { tensors: ['nope'] }),
      (e: unknown) => e instanceof FabricHttpError && e.code === 'API_UNKNOWN_TENSOR' && e.status === 404,
    );
    assert.deepEqual(await ndif.tensors.remove('bias'), { name: 'bias', deleted: true });
    assert.deepEqual(await ndif.tensors.list(), []);
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, SWAP, { tensors: ['bias'] }),
      (e: unknown) => e instanceof FabricHttpError && e.code === 'API_UNKNOWN_TENSOR',
    );
    await assert.rejects(
      ndif.tensors.remove('bias'),
      (e: unknown) => e instanceof FabricHttpError && e.code === 'API_UNKNOWN_TENSOR',
    );
  });

  it('a 256 MiB tensor streams through the control plane (RSS grows far less than the tensor) and reaches a trusted and a sandboxed block', async (t) => {
    const n = (256 * 1024 * 1024) / 4 + 1024;
    const big = new Float32Array(n);
    for (let i = 0; i < n; i += 4096) big[i] = i;
    big[n - 1] = 42.5;
    const tensor = Tensor.from(big, [n]);
    const cp = controlPlanePid();
    const before = rssBytes(cp);
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssBytes(cp));
    }, 20);
    try {
      const up = await ndif.tensors.upload('big', tensor);
      assert.equal(up.bytes, n * 4);
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, rssBytes(cp));
    const grew = peak - before;
    t.diagnostic(`control plane RSS ${before} → peak ${peak} bytes (+${grew}) for a ${n * 4}-byte upload`);
    assert.ok(grew < 64 * 1024 * 1024, `the control plane's RSS grew by ${grew} bytes for a ${n * 4}-byte upload`);
    const out = (await ndif.trace(
      'gpt2-tiny',
      PROMPT,
      'async (m, ctx) => [ctx.tensors.big.shape[0], ctx.tensors.big.flat(4096), ctx.tensors.big.flat(ctx.tensors.big.shape[0] - 1)]',
      { tensors: ['big'], waitMs: 120_000 },
    )) as number[];
    assert.deepEqual(out, [n, 4096, 42.5]);
    const sandboxed = (await ndif.trace(
      'gpt2-tiny',
      PROMPT,
      'async (m, ctx) => [ctx.tensors.big.shape[0], ctx.tensors.big.flat(4096), ctx.tensors.big.flat(ctx.tensors.big.shape[0] - 1)]',
      { tensors: ['big'], untrusted: true, waitMs: 120_000 },
    )) as number[];
    assert.deepEqual(sandboxed, [n, 4096, 42.5]);
    await ndif.tensors.remove('big');
  });
});
