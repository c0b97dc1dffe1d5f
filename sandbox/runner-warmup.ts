// A warm runner exercises its own request path once while it waits in the pool: one synthetic request
// (wait for a module, swap it, return a tree with a tensor) through the real block side over an in-process
// channel, each message also encoded and decoded as a frame. V8 compiles functions on first call, so
// without this the user's request pays a few milliseconds of compilation of the block side and the codec.
// Nothing of it is kept: serveBlocks holds no state between requests.
import { channelPair, serveBlocks } from '../gpu-agent/block/index.js';
import type { BlockEnvironment } from '../gpu-agent/block/index.js';
import { decodeFrame, encodeAgentToRunner, encodeRunnerToAgent } from '../protocol/frames.js';
import type { HostToBlock, TensorPayload } from '../protocol/interleave.js';
import type { Manifest, ManifestModule } from '../protocol/manifest.js';
import { resolveShape } from '../protocol/manifest.js';
import { bytesPerElement, elementCount, isDtype } from '../protocol/tensor-payload.js';

function warmModule(manifest: Manifest): ManifestModule | undefined {
  const order = new Set(manifest.order);
  return manifest.modules.find(
    (m) =>
      m.path !== '' &&
      !m.list &&
      order.has(`${m.path}.output`) &&
      m.outputs.length > 0 &&
      m.outputs.every((t) => t.batched && isDtype(t.dtype) && t.dims.every((d) => d !== null)),
  );
}

/** `transformer.h.0.attn` → `.transformer.h[0].attn` (how a block reaches it on `m`). */
function accessor(path: string): string {
  return path
    .split('.')
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join('');
}

function zeros(t: ManifestModule['outputs'][number]): TensorPayload {
  const dtype = t.dtype as TensorPayload['dtype'];
  const shape = resolveShape(t, 1, 1);
  return { dtype, shape, data: new Uint8Array(elementCount(shape) * bytesPerElement(dtype)) };
}

export async function warmUp(env: BlockEnvironment): Promise<void> {
  const mod = warmModule(env.manifest);
  if (!mod) return;
  const at = accessor(mod.path);
  const source = `async (m, ctx) => { const x = await m${at}.output; m${at}.output = x; return { x, tokens: ctx.tokens, note: 'warm-up' }; }`;
  const { host, blocks } = channelPair();
  const served = serveBlocks(blocks, { manifest: env.manifest, tokenizer: null });
  const send = (msg: HostToBlock) => host.send(decodeFrame('agent-to-runner', encodeAgentToRunner(msg)) as HostToBlock);
  send({
    kind: 'START',
    requestId: 'warm-up',
    steps: 1,
    cache: false,
    invokes: [{ invoke: 0, source, tokens: [0], batchStart: 0, batchSize: 1 }],
  });
  for (let i = 0; i < 8; i++) {
    const msg = await host.receive();
    decodeFrame('runner-to-agent', encodeRunnerToAgent(msg));
    if (msg.kind === 'WAIT') send({ kind: 'VALUE', invoke: 0, addr: msg.addr, values: mod.outputs.map(zeros) });
    if (msg.kind === 'END' || msg.kind === 'EXCEPTION') break;
  }
  send({ kind: 'STOP', reason: 'warm-up' });
  await served;
  host.close();
}
