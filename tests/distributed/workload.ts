// The request mix of the distributed tests: reads and swaps on two models, several prompts, one or two invokes,
// and a canonical form of what the blocks returned (tensors by dtype, shape and the sha256 of their bytes), so
// two runs compare bit for bit.
import { createHash } from 'node:crypto';
import type { Fabric } from '../../client/sdk/fabric.js';
import { Tensor } from '../../client/sdk/tensor.js';

export const MODELS = ['gpt2-tiny', 'gpt2-mini'] as const;

const PROMPTS = [
  'The Eiffel Tower is in',
  'Distributed mode runs on Kafka',
  'A block reads and swaps activations',
  'Hello, world',
  'One, two, three, four, five',
  'The quick brown fox',
];

const BLOCKS = {
  read: 'async (m) => await m.transformer.h[1].output',
  readLog:
    'async (m) => { const h = await m.transformer.h[0].output; console.log("h0", h.shape.join("x")); return { h, ln: await m.transformer.ln_f.output }; }',
  swapZero:
    'async (m) => { const h = await m.transformer.h[0].mlp.output; m.transformer.h[0].mlp.output = h.zerosLike(); const h1 = await m.transformer.h[1].output; const logits = await m.output; return { h1, top: logits.slice(0, -1).topk(5).indices }; }',
  swapScale:
    'async (m) => { m.transformer.h[0].output = (await m.transformer.h[0].output).mul(2); return (await m.output).argmax(-1); }',
} as const;

export interface WorkItem {
  model: (typeof MODELS)[number];
  input: string | Array<{ input: string; block: string }>;
  block: string;
  kind: keyof typeof BLOCKS;
}

/** `n` requests: models alternate 2:1, block kinds and prompts rotate, every fifth has two invokes. */
export function workload(n: number): WorkItem[] {
  const kinds = Object.keys(BLOCKS) as Array<keyof typeof BLOCKS>;
  return Array.from({ length: n }, (_, i) => {
    const kind = kinds[i % kinds.length];
    const block = BLOCKS[kind];
    const model = i % 3 === 2 ? MODELS[1] : MODELS[0];
    const prompt = PROMPTS[i % PROMPTS.length];
    const input =
      i % 5 === 4
        ? [
            { input: prompt, block },
            { input: PROMPTS[(i + 1) % PROMPTS.length], block: BLOCKS.read },
          ]
        : prompt;
    return { model, input, block, kind };
  });
}

/** JSON-ready canonical form of a block's value: each Tensor as dtype, shape and sha256 of its bytes. */
export function canonical(v: unknown): unknown {
  if (v instanceof Tensor) {
    const d = v.data;
    return {
      dtype: v.dtype,
      shape: v.shape,
      sha256: createHash('sha256')
        .update(Buffer.from(d.buffer, d.byteOffset, d.byteLength))
        .digest('hex'),
    };
  }
  if (Array.isArray(v)) return v.map(canonical);
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, canonical(x)]));
  return v;
}

export async function runItem(client: Fabric, w: WorkItem, requestId: string): Promise<unknown> {
  const value = Array.isArray(w.input)
    ? await client.trace(w.model, w.input, undefined, { requestId })
    : await client.trace(w.model, w.input, w.block, { requestId });
  return canonical(value);
}

/** Runs the items on `clients` concurrently (client k takes items k, k + C, …, one after the other). */
export async function runOn(clients: Fabric[], items: WorkItem[], idPrefix: string): Promise<unknown[]> {
  const out: unknown[] = new Array(items.length);
  await Promise.all(
    clients.map(async (c, k) => {
      for (let i = k; i < items.length; i += clients.length) out[i] = await runItem(c, items[i], `${idPrefix}-${i}`);
    }),
  );
  return out;
}
