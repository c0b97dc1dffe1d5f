// A Hugging Face snapshot through the whole fabric: `ndif models add` registers a sharded snapshot folder (the
// fingerprint covers the index and every shard), a deployment serves it, `ndif deploy --dtype int8` places a
// replica sized from its quantized bytes that the agent loads quantized and that answers a trace with nnsight's
// paths; `--dtype int8` on an ONNX export, or with `--gradients`, is refused with CATALOG_DTYPE_UNSUPPORTED.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../client/cli/main.js';
import { ExitCode } from '../../client/cli/exit-codes.js';
import { Fabric } from '../../client/sdk/index.js';
import { modelStream } from '../../domain/shared/ids.js';
import { snapshotWeightsBytes } from '../../gpu-agent/runtime/hf/snapshot-files.js';
import { startInProcessFabric, type InProcessFabric } from '../client/fabric-harness.js';
import { hfDir } from '../runtime/hf-fixtures.js';

let fab: InProcessFabric;
let tmp: string;

async function ndif(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    env: { NDIF_URL: fab.url, NDIF_API_KEY: fab.keys!.operator },
  });
  return { code, out, err };
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-snapshot-'));
  fab = await startInProcessFabric({ auth: true, gpus: '2x16GiB' });
});
after(async () => {
  await fab.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('Hugging Face snapshots in the fabric', () => {
  let dir: string;

  it('ndif models add registers a sharded snapshot: the fingerprint covers the index and every shard', async () => {
    dir = join(tmp, 'llama-sharded');
    cpSync(join(hfDir, 'llama', 'snapshot-sharded'), dir, { recursive: true });
    const r = await ndif(['models', 'add', 'llama-snap', dir]);
    assert.equal(r.code, ExitCode.ok, r.err);
    const [e] = (await fab.cp.context.store.readStream(modelStream('llama-snap'))).map(
      (x) => x.data as Record<string, unknown>,
    );
    const files = (e!.files as Array<{ name: string }>).map((f) => f.name);
    assert.deepEqual(files.slice(0, 7), [
      'model.safetensors.index.json',
      ...Array.from({ length: 6 }, (_, i) => `model-0000${i + 1}-of-00006.safetensors`),
    ]);
    assert.ok(files.includes('config.json') && files.includes('generation_config.json'), files.join(','));
    assert.equal(e!.family, 'llama');
    assert.equal(e!.generative, true);
  });

  it('deploy --dtype int8: sized from the quantized bytes, loaded quantized, answers with nnsight paths', async () => {
    const r = await ndif(['deploy', 'llama-snap', '--dtype', 'int8', '--wait', '120s']);
    assert.equal(r.code, ExitCode.ok, r.err + r.out);
    const events = await fab.cp.context.store.readStream('deployment-llama-snap');
    const requested = events.find((x) => x.type === 'ReplicaRequested')!.data as {
      settings: { dtype: string; weightsBytes: number };
    };
    assert.equal(requested.settings.dtype, 'int8');
    assert.equal(requested.settings.weightsBytes, snapshotWeightsBytes(dir, 'int8'));
    const sdk = new Fabric({ url: fab.url, apiKey: fab.keys!.user, progress: false, onLog: null });
    const shape = await sdk.trace(
      'llama-snap',
      'The Eiffel Tower is in Paris',
      async (m: any) => (await m.model.layers[1].mlp.down_proj.output).shape,
    );
    assert.deepEqual(shape, [1, 10, 64]);
    sdk.close();
  });

  it('--dtype int8 on an ONNX export, or with --gradients, is CATALOG_DTYPE_UNSUPPORTED', async () => {
    const onnx = await ndif(['deploy', 'gpt2-tiny', '--dtype', 'int8', '--no-wait']);
    assert.notEqual(onnx.code, ExitCode.ok);
    assert.match(onnx.err, /CATALOG_DTYPE_UNSUPPORTED|is an ONNX export/);
    const grads = await ndif(['deploy', 'llama-snap', '--dtype', 'int4', '--gradients', '--no-wait']);
    assert.notEqual(grads.code, ExitCode.ok);
    assert.match(grads.err, /computes no gradients/);
  });
});
