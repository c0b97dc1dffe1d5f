// Registering real models through the command API and the `ndif models` CLI, on a fabric in this process with a
// real GPU agent: a Llama export (external data) is registered with its files' sha256 fingerprint, served to a
// request whose events record that fingerprint (ReplicaHot, RequestCompleted, `ndif why`); bad folders are refused
// with a code naming the file and the fix and append nothing; a second registration with other files is refused
// unless replaced; removal is refused while deployed; an agent whose folder holds other files refuses to load
// them. The control plane and the agent keep serving throughout.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CliRun, runNdif } from '../support/ndif.js';
import { ExitCode } from '../../client/cli/exit-codes.js';
import { Fabric } from '../../client/sdk/index.js';
import { modelStream, requestStream } from '../../domain/shared/ids.js';
import { activeReplicas } from '../../projections/cluster/queries.js';
import { decodeModel, encodeModel } from '../../gpu-agent/runtime/onnx/codec.js';
import { startInProcessFabric, type InProcessFabric } from '../client/fabric-harness.js';
import { hfDir } from '../runtime/hf-fixtures.js';

let fab: InProcessFabric;
let tmp: string;

function ndif(args: string[]): Promise<CliRun> {
  return runNdif(args, { NDIF_URL: fab.url, NDIF_API_KEY: fab.keys!.operator });
}

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${fab.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${fab.keys!.operator}` },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

/** A copy of a fixture model folder in the test's temp dir, changed by `edit`. */
function folder(name: string, src: string, edit?: (dir: string) => void): string {
  const dir = join(tmp, name);
  cpSync(src, dir, { recursive: true });
  edit?.(dir);
  return dir;
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-register-'));
  fab = await startInProcessFabric({ auth: true, gpus: '2x16GiB' });
});
after(async () => {
  await fab.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('registering models', () => {
  let llama: string;
  let fingerprint: string;

  it('ndif models add registers a Llama export with external data: fingerprint, family, inputs, dtype', async () => {
    llama = folder('llama', join(hfDir, 'llama', 'dynamo'));
    const r = await ndif(['models', 'add', 'llama-tiny', llama]);
    assert.equal(r.code, ExitCode.ok, r.err);
    const m = /llama-tiny registered: sha256 ([0-9a-f]{64})/.exec(r.out);
    assert.ok(m, r.out);
    fingerprint = m[1]!;
    assert.match(r.err, /model\.onnx\.data/);
    const [e] = (await fab.cp.context.store.readStream(modelStream('llama-tiny'))).map(
      (x) => x.data as Record<string, unknown>,
    );
    assert.equal(e!.fingerprint, fingerprint);
    assert.equal(e!.family, 'llama');
    assert.equal(e!.architecture, 'LlamaForCausalLM');
    assert.deepEqual(e!.inputs, ['input_ids', 'attention_mask', 'position_ids']);
    assert.equal(e!.dtype, 'float32');
    assert.equal(e!.padding, 'left');
    assert.equal(e!.generative, true);
    assert.deepEqual(
      (e!.files as Array<{ name: string }>).map((f) => f.name),
      ['model.onnx', 'model.onnx.data', 'config.json', 'tokenizer.json', 'tokenizer_config.json'],
    );
    const again = await ndif(['models', 'add', 'llama-tiny', llama]);
    assert.match(again.out, /already registered with these files/);
    const list = await ndif(['models', 'list']);
    assert.match(list.out, /llama-tiny\s+LlamaForCausalLM\s+float32/);
    assert.match(list.out, /gpt2-tiny/, 'NDIF_MODELS registered the bundled model at start');
  });

  it('a request on it runs on the agent and records the weights it ran on', async () => {
    const sdk = new Fabric({ url: fab.url, apiKey: fab.keys!.user, progress: false, onLog: null });
    const shape = await sdk.trace(
      'llama-tiny',
      'The Eiffel Tower is in Paris',
      async (m: any) => (await m.model.layers[1].self_attn.output).shape,
      { requestId: 'llama-req-1' },
    );
    assert.deepEqual(shape, [1, 10, 64]);
    // With auth on the fabric records the request under its submitter's key (`<keyId>:<id>`).
    const recorded = `${fab.keys!.user.slice(5, 21)}:llama-req-1`;
    const events = await fab.cp.context.store.readStream(requestStream(recorded));
    const done = events.find((e) => e.type === 'RequestCompleted')!;
    assert.equal((done.data as { weightsFingerprint?: string }).weightsFingerprint, fingerprint);
    const status = (await (
      await fetch(`${fab.url}/requests/llama-req-1`, { headers: { authorization: `Bearer ${fab.keys!.user}` } })
    ).json()) as { result: { weightsFingerprint?: string } };
    assert.equal(status.result.weightsFingerprint, fingerprint, 'GET /requests/:id says which weights answered');
    const why = await ndif(['why', recorded]);
    assert.match(why.out, new RegExp(`on weights ${fingerprint.slice(0, 12)}`));
  });

  it('bad folders are refused with a code naming the file and the fix; nothing is appended', async () => {
    const bert = join(hfDir, 'bert', 'torchscript');
    const cases: Array<[string, string, RegExp]> = [
      [
        folder('no-tokenizer', bert, (d) => rmSync(join(d, 'tokenizer.json'))),
        'CATALOG_MODEL_FILES_MISSING',
        /has no tokenizer\.json/,
      ],
      [
        folder('no-config', bert, (d) => rmSync(join(d, 'config.json'))),
        'CATALOG_MODEL_FILES_MISSING',
        /has no config\.json/,
      ],
      [
        folder('bad-config', bert, (d) => writeFileSync(join(d, 'config.json'), '{ not json')),
        'CATALOG_MODEL_CONFIG_INVALID',
        /config\.json is not a valid model config/,
      ],
      [
        folder('bad-tokenizer', bert, (d) => writeFileSync(join(d, 'tokenizer.json'), '{"model": 1}')),
        'CATALOG_TOKENIZER_INVALID',
        /tokenizer/,
      ],
      [
        folder('truncated', bert, (d) => truncateSync(join(d, 'model.onnx'), 50_000)),
        'MODEL_INVALID',
        /model\.onnx is not a readable ONNX model/,
      ],
      [
        folder('no-data', join(hfDir, 'bert', 'dynamo'), (d) => rmSync(join(d, 'model.onnx_data'))),
        'MODEL_EXTERNAL_DATA_MISSING',
        /model\.onnx_data/,
      ],
      [
        folder('static', join(hfDir, 'gpt2', 'dynamo-static')),
        'MODEL_STATIC_DIMS',
        /batch >= 2 example and dynamic_shapes/,
      ],
      [
        folder('custom-op', bert, (d) => {
          const m = decodeModel(readFileSync(join(d, 'model.onnx')));
          const n = m.graph!.node!.find((x) => x.op_type === 'Erf')!;
          n.domain = 'com.example';
          writeFileSync(join(d, 'model.onnx'), encodeModel(m));
        }),
        'MODEL_OP_UNSUPPORTED',
        /uses op com\.example:Erf/,
      ],
      [join(tmp, 'does-not-exist'), 'CATALOG_MODEL_FILES_MISSING', /does not exist/],
    ];
    const head = await fab.cp.context.store.headPosition();
    for (const [dir, code, message] of cases) {
      const r = await post('/models', { model: 'broken', dir });
      assert.equal(r.json.code, code, `${dir}: ${JSON.stringify(r.json)}`);
      assert.equal(r.status, 422);
      assert.match(String(r.json.message), message);
    }
    assert.equal(await fab.cp.context.store.headPosition(), head, 'no refused registration appended anything');
    const unsupportedInput = await post('/models', { model: 'bad key!', dir: bert });
    assert.equal(unsupportedInput.status, 400);
  });

  it('other files under a registered key: CP_MODEL_CONFLICT; removal refused while deployed; replace once evicted', async () => {
    const other = folder('llama-fp16', join(hfDir, 'llama', 'float16'));
    const conflict = await post('/models', { model: 'llama-tiny', dir: other });
    assert.equal(conflict.status, 409);
    assert.equal(conflict.json.code, 'CP_MODEL_CONFLICT');
    const deployed = await ndif(['deploy', 'llama-tiny', '--wait', '60s']);
    assert.equal(deployed.code, ExitCode.ok, deployed.err);
    const removing = await ndif(['models', 'remove', 'llama-tiny']);
    assert.notEqual(removing.code, ExitCode.ok);
    assert.match(removing.err, /CP_MODEL_DEPLOYED|cannot be removed while deployed/);
    const replacing = await post('/models', { model: 'llama-tiny', dir: other, replace: true });
    assert.equal(replacing.json.code, 'CP_MODEL_DEPLOYED');
    const evicted = await ndif(['evict', '--model', 'llama-tiny']);
    assert.equal(evicted.code, ExitCode.ok, evicted.err);
    for (let i = 0; i < 200 && activeReplicas(fab.cp.view.state.cluster, 'llama-tiny').length > 0; i++)
      await new Promise((r) => setTimeout(r, 50));
    const replaced = await post('/models', { model: 'llama-tiny', dir: other, replace: true });
    assert.equal(replaced.status, 201, JSON.stringify(replaced.json));
    const models = (await (
      await fetch(`${fab.url}/models`, { headers: { authorization: `Bearer ${fab.keys!.operator}` } })
    ).json()) as { models: Array<{ key: string; defaults: { dtype: string } }> };
    assert.equal(
      models.models.find((m) => m.key === 'llama-tiny')!.defaults.dtype,
      'float16',
      'placement uses the registered dtype',
    );
    const removed = await ndif(['models', 'remove', 'llama-tiny']);
    assert.equal(removed.code, ExitCode.ok, removed.err);
    assert.ok(!(await ndif(['models', 'list'])).out.includes('llama-tiny'));
  });

  it('an agent whose folder holds other files than the registered ones refuses to load them', async () => {
    const dir = folder('qwen', join(hfDir, 'qwen2', 'dynamo'));
    assert.equal((await post('/models', { model: 'qwen-tiny', dir })).status, 201);
    writeFileSync(
      join(dir, 'config.json'),
      readFileSync(join(dir, 'config.json'), 'utf8').replace('"rms_norm_eps": 1e-06', '"rms_norm_eps": 1e-05'),
    );
    const r = await ndif(['deploy', 'qwen-tiny', '--wait', '60s']);
    assert.notEqual(r.code, ExitCode.ok);
    assert.match(r.err + r.out, /are not the registered ones/);
    const sdk = new Fabric({ url: fab.url, apiKey: fab.keys!.user, progress: false, onLog: null });
    assert.deepEqual(
      await sdk.trace('gpt2-tiny', 'Hello', async (m: any) => (await m.transformer.h[0].output).shape),
      [1, 1, 64],
      'the fabric still serves',
    );
  });
});
