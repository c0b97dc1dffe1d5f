// The fabric end to end, as a researcher and an operator meet it: the real processes (`npm start`: the embedded
// fabric and its GPU agent child) on a free port over a temp data folder; the bundled model deployed with the
// real `ndif` bin; blocks that read and swap a layer run through the SDK, their tensors checked bit for bit
// against the runtime called directly; the full status sequence seen on the websocket (on demand and deployed);
// a client of another protocol version and malformed blocks refused end to end.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Fabric, FabricHttpError, ProtocolMismatchError, RemoteError, Tensor } from '../../client/sdk/index.js';
import type { StatusMessage } from '../../client/sdk/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import { materializeTree } from '../../protocol/result-container.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { testCatalogCache } from '../support/catalog-cache.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const distDir = resolve(here, '..', '..');
const repoRoot = resolve(distDir, '..');
const BIN = join(repoRoot, 'client', 'cli', 'bin.mjs');
const MAIN = join(distDir, 'fabric', 'embedded', 'main.js');

let tmp: string;
let fabric: ChildProcess;
let fabricLog = '';
let url: string;
let ndif: Fabric;
let direct: HostedModel;

const PROMPT = 'The Eiffel Tower is in';
const readAndSwap = async (m: any) => {
  const before = await m.transformer.h[0].mlp.output;
  m.transformer.h[0].mlp.output = before.mul(0);
  const h = await m.transformer.h[1].output;
  console.log('read layer 1:', h.shape.join('x'));
  return { before, h, logits: await m.output };
};

async function runDirect(block: string) {
  const r = await direct.run({ invokes: [{ prompt: PROMPT, block }] }, () =>
    createInProcessBlocks({ manifest: direct.manifest(), tokenizer: direct.tokenizer }),
  );
  return materializeTree(r.invokes[0]!.result, (p) => Tensor.fromPayload(p)) as Record<string, Tensor>;
}

const bitsOf = (t: Tensor) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);

function assertBitExact(got: Record<string, Tensor>, want: Record<string, Tensor>) {
  for (const k of Object.keys(want)) {
    assert.ok(got[k] instanceof Tensor, `${k} is a Tensor`);
    assert.deepEqual(got[k].shape, want[k]!.shape, `${k} shape`);
    assert.equal(got[k].dtype, want[k]!.dtype);
    assert.ok(bitsOf(got[k]).equals(bitsOf(want[k]!)), `${k}: the same bits as the runtime called directly`);
  }
}

/** Runs the real `ndif` bin (a child process) against the fabric. */
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

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-e2e-'));
  const tinyDir = ensureModel('gpt2-tiny');
  fabric = spawn(process.execPath, ['--enable-source-maps', MAIN], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_PORT: '0',
      NDIF_DATA_DIR: join(tmp, 'data'),
      NDIF_CATALOG_CACHE: testCatalogCache(join(tmp, 'catalog')),
      // A second key for the same files, never deployed by hand: a request for it deploys it on demand.
      NDIF_MODELS: `gpt2-tiny,tiny-on-demand=${tinyDir}`,
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      NDIF_LOG_LEVEL: process.env.NDIF_TEST_LOG_LEVEL ?? 'warn',
    },
  });
  fabric.stderr!.setEncoding('utf8').on('data', (d: string) => (fabricLog = (fabricLog + d).slice(-20_000)));
  url = await new Promise<string>((resolveUrl, reject) => {
    let out = '';
    const timer = setTimeout(
      () => reject(new Error(`the fabric did not start within 60 s:\n${out}\n${fabricLog}`)),
      60_000,
    );
    fabric.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /NDIF fabric listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]!);
      }
    });
    fabric.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the fabric exited (${code}) before it listened:\n${out}\n${fabricLog}`));
    });
  });
  ndif = new Fabric({ url, progress: false, onLog: null });
  direct = await loadModel(tinyDir, { key: 'gpt2-tiny' });
});

after(async () => {
  ndif?.close();
  await direct?.close();
  if (fabric && fabric.exitCode === null) {
    const exited = once(fabric, 'exit');
    fabric.kill('SIGTERM');
    const [code] = (await exited) as [number];
    assert.equal(code, 0, `the fabric stops cleanly on SIGTERM:\n${fabricLog}`);
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('the fabric end to end', () => {
  it('deploys the bundled model through the ndif CLI', async () => {
    const r = await cli(['deploy', 'gpt2-tiny', '--wait', '60s']);
    assert.equal(r.code, 0, `${r.out}\n${r.err}\n${fabricLog}`);
    assert.match(r.out, /^gpt2-tiny#1 HOT on local-agent GPU 0/m);
    const s = await cli(['status']);
    assert.equal(s.code, 0, s.err);
    assert.match(s.out, /^gpt2-tiny +READY +no +0 +gpt2-tiny#1 HOT \(local-agent GPU 0\)$/m);
  });

  it('a block reads and swaps a layer: tensors bit-identical to the runtime, the full status sequence on the websocket', async () => {
    const seen: StatusMessage[] = [];
    const logs: string[] = [];
    const out = await ndif.trace('gpt2-tiny', PROMPT, readAndSwap, {
      onMessage: (m) => seen.push(m),
      onLog: (l) => logs.push(l.line),
    });
    assert.deepEqual(
      seen.map((m) => m.status),
      ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING', 'LOG', 'COMPLETED'],
    );
    assert.equal(seen[1]!.position, 0);
    assert.equal(seen[2]!.replicaId, 'gpt2-tiny#1');
    assert.deepEqual(logs, ['read layer 1: 1x7x64']);
    assertBitExact(out, await runDirect(readAndSwap.toString()));
    assert.ok(
      out.before.data.some((x: number) => x !== 0),
      'the value read is the one before the swap',
    );
  });

  it('a model not deployed is deployed on demand: PROVISIONING and DEPLOYING reach the client', async () => {
    const seen: string[] = [];
    const out = await ndif.trace('tiny-on-demand', PROMPT, readAndSwap, {
      onMessage: (m) => seen.push(m.status),
      waitMs: 120_000,
    });
    assert.deepEqual(seen, [
      'RECEIVED',
      'PROVISIONING',
      'DEPLOYING',
      'QUEUED',
      'DISPATCHED',
      'RUNNING',
      'LOG',
      'COMPLETED',
    ]);
    assertBitExact(out, await runDirect(readAndSwap.toString()));
  });

  it('an untrusted block runs in the sandbox and gives the same bits', async () => {
    const out = await ndif.trace('gpt2-tiny', PROMPT, readAndSwap, { untrusted: true, waitMs: 60_000 });
    assertBitExact(out, await runDirect(readAndSwap.toString()));
  });

  it('a client of another protocol major is refused with both versions named, by the SDK and by the fabric', async () => {
    const other = new Fabric({ url, progress: false, protocolVersion: '2.0' });
    await assert.rejects(
      other.trace('gpt2-tiny', PROMPT, readAndSwap),
      (e: unknown) => e instanceof ProtocolMismatchError && e.clientVersion === '2.0' && e.serverVersion === '1.0',
    );
    const unchecked = new Fabric({ url, progress: false, protocolVersion: '2.0', checkVersion: false });
    await assert.rejects(
      unchecked.submit('gpt2-tiny', PROMPT, readAndSwap),
      (e: unknown) => e instanceof ProtocolMismatchError && /1\.0/.test(e.message) && /2\.0/.test(e.message),
    );
    const raw = await fetch(`${url}/cluster`, { headers: { 'x-ndif-protocol': '2.0' } });
    assert.equal(raw.status, 400);
    assert.equal(((await raw.json()) as { code: string }).code, 'API_PROTOCOL_MISMATCH');
  });

  it('malformed blocks: a syntax error refused at submission with its line; a block that throws fails with its own stack', async () => {
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, 'async (m) => {\n  const h = await m.transformer.h[0].output\n  return h h;\n}'),
      (e: unknown) => {
        assert.ok(e instanceof FabricHttpError, String(e));
        assert.equal(e.code, 'BLOCK_SYNTAX_ERROR');
        assert.equal(e.status, 400);
        assert.equal(e.details?.line, 3);
        return true;
      },
    );
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, '"not a function"'),
      (e: unknown) =>
        e instanceof FabricHttpError &&
        e.code === 'BLOCK_SYNTAX_ERROR' &&
        /not a function expression/.test(e.remoteMessage),
    );
    await assert.rejects(
      ndif.trace(
        'gpt2-tiny',
        PROMPT,
        'async (m) => {\n  await m.transformer.h[0].output;\n  throw new Error("bad block");\n}',
      ),
      (e: unknown) => {
        assert.ok(e instanceof RemoteError, String(e));
        assert.equal(e.type, 'BlockError');
        assert.equal(e.remoteMessage, 'Error: bad block');
        assert.match(e.remoteStack ?? '', /at .*block-0\.js:3:\d+/);
        return true;
      },
    );
  });
});
