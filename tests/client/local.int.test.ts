// The SDK's local mode (client/sdk/local): the same calls as a Fabric, run in this process on the model folder with
// the agent's runtime. The worked examples of docs/sdk.md, a read-and-swap trace, a session and a generation give the
// same bits locally as through a real fabric (in this process, serving the same bundled gpt2-tiny folder), and a
// block's errors and bad input are the fabric's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { FabricHttpError, RemoteError, Tensor } from '../../client/sdk/index.js';
import { LocalFabric } from '../../client/sdk/local/index.js';
import { readDoc, sdkExamples } from '../runtime/doc-fences.js';
import { withFabricClient } from './fabric-harness.js';

const env = withFabricClient();
const local = new LocalFabric({ models: { 'gpt2-tiny': ensureModel('gpt2-tiny') }, onLog: null });
test.after(() => local.close());

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (
  ...args: string[]
) => (...a: unknown[]) => Promise<unknown>;

/** Every value as exact bits: tensors as dtype, shape and bytes; numbers by their float64 bits. */
function bits(v: unknown): unknown {
  if (v instanceof Tensor)
    return {
      dtype: v.dtype,
      shape: v.shape,
      bytes: Buffer.from(v.data.buffer, v.data.byteOffset, v.data.byteLength).toString('hex'),
    };
  if (typeof v === 'number') return Buffer.from(new Float64Array([v]).buffer).toString('hex');
  if (typeof v === 'function') return `function ${v.name}`;
  if (v instanceof Map) return [...v.entries()].map(bits);
  if (Array.isArray(v)) return v.map(bits);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, bits(x)]));
  return v;
}

/** The top-level constants an example declares (`const x = …`, `const [, y] = …`). */
function declared(code: string): string[] {
  const names: string[] = [];
  for (const m of code.matchAll(/^const\s+(?:\[([^\]]*)\]|(\w+))\s*=/gm)) {
    if (m[2]) names.push(m[2]);
    else for (const n of m[1]!.split(',')) if (n.trim()) names.push(n.trim());
  }
  return names;
}

const examples = sdkExamples(readDoc('sdk.md'));

test('the docs have the worked examples this test runs locally', () => {
  assert.deepEqual(
    examples.map((e) => e.name),
    ['training-loop', 'activation-patching', 'logit-lens', 'scan'],
  );
});

for (const ex of examples) {
  test(`docs/sdk.md example ${ex.name}: local mode gives the fabric's bits and the documented value`, async () => {
    const names = declared(ex.code);
    assert.ok(names.includes(ex.value), `the example declares ${ex.value}`);
    const run = new AsyncFunction('ndif', `${ex.code}\nreturn { ${names.join(', ')} };`);
    const remote = (await run(env.ndif)) as Record<string, unknown>;
    const here = (await run(local)) as Record<string, unknown>;
    assert.deepEqual(JSON.parse(JSON.stringify(here[ex.value])), ex.result);
    assert.deepStrictEqual(bits(here), bits(remote));
  });
}

const readSwap = async (m: any) => {
  m.transformer.h[0].mlp.output = (await m.transformer.h[0].mlp.output).mul(0);
  const h1 = await m.transformer.h[1].output;
  console.log('h1', h1.shape.join('x'));
  return { h1, logits: await m.output };
};

test('a read and a swap: the same tensors bit for bit, log lines and statuses as the fabric sends them', async () => {
  const logs: string[] = [];
  const statuses: string[] = [];
  const here = await local.trace('gpt2-tiny', ['The Eiffel Tower is in', 'Hello'], readSwap, {
    onLog: (l) => logs.push(`${l.stream} ${l.line}`),
    onStatus: (u) => statuses.push(u.status),
  });
  const remote = await env.ndif.trace('gpt2-tiny', ['The Eiffel Tower is in', 'Hello'], readSwap);
  assert.equal(here[0].h1.shape.length, 3);
  assert.deepStrictEqual(bits(here), bits(remote));
  assert.deepEqual(logs, [`stdout h1 ${here[0].h1.shape.join('x')}`, `stdout h1 ${here[1].h1.shape.join('x')}`]);
  assert.deepEqual(statuses, ['RECEIVED', 'RUNNING', 'COMPLETED']);
});

test('a session and a generation: the same values and tokens', async () => {
  const traces = [
    {
      input: 'Hello',
      block: async (m: any, ctx: any) => {
        ctx.shared.h = await m.transformer.h[0].output;
      },
    },
    { input: 'Hello', block: async (m: any, ctx: any) => (await m.transformer.h[1].output).add(ctx.shared.h) },
  ];
  const seen: string[] = [];
  const here = await local.session('gpt2-tiny', traces, {
    onTrace: (t) => seen.push(`${t.trace}/${t.traces} ${t.status}`),
  });
  assert.deepStrictEqual(bits(here), bits(await env.ndif.session('gpt2-tiny', traces)));
  assert.deepEqual(seen, ['0/2 RUNNING', '0/2 COMPLETED', '1/2 RUNNING', '1/2 COMPLETED']);

  const opts = { maxNewTokens: 6, temperature: 0.9, seed: 3 };
  const streamed: number[] = [];
  const s = local.stream('gpt2-tiny', 'Once upon a time', undefined, opts);
  for await (const t of s) streamed.push(t.token);
  const remote = await env.ndif.execute('gpt2-tiny', 'Once upon a time', undefined, opts);
  assert.deepEqual([streamed], remote.meta.generated);
  assert.deepEqual((await s.result).meta.generated, remote.meta.generated);
});

test("errors are the fabric's: a block that throws is RemoteError, bad options and a syntax error are refused", async () => {
  const thrown = await local
    .trace('gpt2-tiny', 'Hi', async () => {
      throw new TypeError('nope');
    })
    .catch((e: unknown) => e);
  assert.ok(thrown instanceof RemoteError, String(thrown));
  assert.equal(thrown.type, 'BlockError');
  assert.match(thrown.message, /nope/);
  const late = await local
    .trace('gpt2-tiny', 'Hi', async (m: any) => {
      await m.transformer.h[1].output;
      return m.transformer.h[0].output;
    })
    .catch((e: unknown) => e);
  assert.ok(late instanceof RemoteError);
  assert.equal(late.type, 'OutOfOrder');
  const bad = await local.trace('gpt2-tiny', 'Hi', undefined, { topP: 2 }).catch((e: unknown) => e);
  assert.ok(bad instanceof FabricHttpError);
  assert.equal(bad.code, 'GENERATION_BAD_TOP_P');
  const syntax = await local.trace('gpt2-tiny', 'Hi', 'async (m) => { return ( }').catch((e: unknown) => e);
  assert.ok(syntax instanceof FabricHttpError);
  assert.equal(syntax.code, 'BLOCK_SYNTAX_ERROR');
  const unknown = await local.trace('gpt2-large', 'Hi').catch((e: unknown) => e);
  assert.ok(unknown instanceof FabricHttpError);
  assert.equal(unknown.code, 'API_UNKNOWN_MODEL');
});

test("tokenizer and manifest are the fabric's", async () => {
  const [a, b] = [await local.tokenizer('gpt2-tiny'), await env.ndif.tokenizer('gpt2-tiny')];
  assert.equal(a.sha256, b.sha256);
  assert.deepEqual(a.encode(' Paris is'), b.encode(' Paris is'));
  assert.deepEqual(
    await local.manifest('gpt2-tiny', { batch: 1, sequence: 4 }),
    await env.ndif.manifest('gpt2-tiny', { batch: 1, sequence: 4 }),
  );
});
