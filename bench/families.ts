// `npm run bench -- families [--rounds N] [--tokens T] [--budget-ms B]`: the cost of interleaving on one model of
// each family at a moderate shape (8 layers, d_model 512, 8 heads; Llama with 2 KV heads and a gated SiLU MLP;
// BERT an encoder), generated on first use and cached (bench/families/models.ts). Per family, through
// HostedModel.run with in-process blocks:
//   plain  one forward pass, nothing waited on (the whole graph in one session.run)
//   read   a block reads layer[L].output (the pass is cut there and the value handed over)
//   swap   a block replaces layer[L]'s MLP output (BERT: its intermediate) with zeros
// Rounds rotate the three so drift on a shared machine hits all alike; a ratio is the median over rounds of the
// round's read (swap) time over its plain time. `bitexact`: the read
// run's outputs equal the plain run's bit for bit. Targets: worst read ratio <= 1.05, worst swap ratio <= 1.10.
import { performance } from 'node:perf_hooks';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel, RunRequest } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { Sfc32 } from '../catalog/bundled/prng.js';
import { ensureFamilyModel, FAMILY_MODELS, type FamilyName } from './families/models.js';
import { interleavedRounds, median, numberArg } from './_numbers.js';

const bytesOf = (r: Awaited<ReturnType<HostedModel['run']>>) =>
  r.invokes[0]!.result.tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
const sameBits = (a: Buffer[], b: Buffer[]) => a.length === b.length && a.every((x, i) => x.equals(b[i]!));

async function benchFamily(name: FamilyName, o: { rounds: number; tokens: number; budgetMs: number }) {
  const spec = FAMILY_MODELS[name];
  const { dir, generateS } = ensureFamilyModel(name);
  const tl = performance.now();
  const hm = await loadModel(dir, { key: `bench-${name}` });
  const loadS = (performance.now() - tl) / 1000;
  try {
    const rng = new Sfc32(7);
    const tokens = Array.from({ length: o.tokens }, () => 1 + Math.floor(rng.next() * (hm.manifest().vocabSize - 1)));
    const layers = hm.manifest().modules.find((m) => m.path === spec.layer)!.children.length;
    const L = `m.${spec.layer}[${Math.floor(layers / 2)}]`;
    const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
    const blocks = {
      plain: 'async (m) => await m.outputs',
      read: `async (m) => { await ${L}.output; return await m.outputs; }`,
      swap: `async (m) => { const v = await ${L}.${spec.mlp}.output; ${L}.${spec.mlp}.output = v.zerosLike(); return await m.outputs; }`,
    };
    const req = (block: string): RunRequest => ({ invokes: [{ tokens, block }] });
    // Correctness first (untimed, also warms the segments each variant uses).
    const plain = bytesOf(await hm.run(req(blocks.plain), open));
    const bitexact = sameBits(plain, bytesOf(await hm.run(req(blocks.read), open)));
    const swapChanges = !sameBits(plain, bytesOf(await hm.run(req(blocks.swap), open)));
    const names = Object.keys(blocks) as Array<keyof typeof blocks>;
    const { times, rounds } = await interleavedRounds(names, o.rounds, o.budgetMs, (n) =>
      hm.run(req(blocks[n as keyof typeof blocks]), open),
    );
    const [plainMs, readMs, swapMs] = [median(times.plain!), median(times.read!), median(times.swap!)];
    // Each round's three runs are adjacent in time: the median of per-round ratios is what drift on a shared
    // machine disturbs least.
    const ratio = (n: 'read' | 'swap') => median(times[n]!.map((t, i) => t / times.plain![i]!));
    process.stderr.write(
      `${name}: ${generateS > 0 ? `generated in ${generateS.toFixed(1)} s, ` : ''}loaded in ${loadS.toFixed(1)} s, ${rounds} rounds, plain ${plainMs.toFixed(1)} ms\n`,
    );
    return {
      read_ratio: Number(ratio('read').toFixed(4)),
      swap_ratio: Number(ratio('swap').toFixed(4)),
      bitexact,
      swap_changes_outputs: swapChanges,
      plain_ms: Number(plainMs.toFixed(2)),
      read_ms: Number(readMs.toFixed(2)),
      swap_ms: Number(swapMs.toFixed(2)),
      rounds,
      weights_mb: Number((hm.weightsBytes / 2 ** 20).toFixed(1)),
      generate_s: Number(generateS.toFixed(2)),
      load_s: Number(loadS.toFixed(2)),
    };
  } finally {
    await hm.close();
  }
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const o = {
    rounds: numberArg(args, 'rounds', 80),
    tokens: numberArg(args, 'tokens', 64),
    budgetMs: numberArg(args, 'budget-ms', 9000),
  };
  const families: Record<string, Awaited<ReturnType<typeof benchFamily>>> = {};
  for (const name of Object.keys(FAMILY_MODELS) as FamilyName[]) families[name] = await benchFamily(name, o);
  const all = Object.values(families);
  return {
    bench: 'families',
    prompt_tokens: o.tokens,
    families,
    worst_read_ratio: Math.max(...all.map((f) => f.read_ratio)),
    worst_swap_ratio: Math.max(...all.map((f) => f.swap_ratio)),
    bitexact: all.every((f) => f.bitexact),
    total_s: Number(((performance.now() - t0) / 1000).toFixed(2)),
  };
}
