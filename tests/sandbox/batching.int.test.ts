// A batch of requests mixes trusted and untrusted ones (gpu-agent/runtime/serving/batcher.ts): each block runs where
// its request's runs — in this process or in its own sandbox runner — and the batch is formed by the host. One forward
// pass, each request's values bit for bit as alone; an untrusted block that throws fails only its request.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { HostedModel, RunResult } from '../../gpu-agent/runtime/index.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { TOKENS, inProcess, tinyModel, tinySandbox } from './helpers.js';

let hm: HostedModel;
let sb: Sandbox;

before(async () => {
  ({ sb, hm } = await tinySandbox({ poolSize: 2 }));
});

after(async () => {
  await sb.close();
  await (await tinyModel()).close();
});

const READ = 'async (m) => ({ h: await m.transformer.h[1].output, logits: await m.output })';
const SWAP =
  'async (m) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = h.mul(0); return await m.output; }';

function bytes(r: RunResult): Buffer[] {
  return r.invokes[0]!.result.tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
}

test('trusted and untrusted requests share one forward pass, each bit for bit as alone', {
  timeout: 60_000,
}, async () => {
  const trusted = (block: string) => hm.run({ invokes: [{ tokens: TOKENS, block }], timeoutMs: 20_000 }, inProcess(hm));
  const untrusted = (block: string) =>
    hm.run({ invokes: [{ tokens: TOKENS, block }], timeoutMs: 20_000 }, sb.opener('gpt2-tiny'));
  const readAlone = await trusted(READ);
  const swapAlone = await untrusted(SWAP);
  const [t, u, boom] = await Promise.allSettled([
    trusted(READ),
    untrusted(SWAP),
    untrusted('async (m) => { await m.transformer.h[0].output; throw new Error("untrusted boom"); }'),
  ]);
  assert.equal(t.status, 'fulfilled');
  assert.equal(u.status, 'fulfilled');
  const tr = (t as PromiseFulfilledResult<RunResult>).value;
  const ur = (u as PromiseFulfilledResult<RunResult>).value;
  assert.equal(tr.batch?.id, ur.batch?.id, 'one batch');
  assert.equal(tr.batch?.requests, 3);
  assert.ok(
    bytes(tr).every((b, i) => b.equals(bytes(readAlone)[i]!)),
    'the trusted read next to an untrusted swap',
  );
  assert.ok(
    bytes(ur).every((b, i) => b.equals(bytes(swapAlone)[i]!)),
    'the untrusted swap',
  );
  assert.equal(boom.status, 'rejected');
  assert.match(String((boom as PromiseRejectedResult).reason.message), /untrusted boom/);
});
