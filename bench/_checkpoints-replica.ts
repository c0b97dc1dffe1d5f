// One replica of the checkpoints bench, in its own process so its memory is its own: loads the GPT-2-small-shape
// snapshot (float32, or quantized to `dtype`), answers one short prompt, measures its RSS over the process's
// before loading, then runs the bench's prompts (each alone in a row of one batch) and writes each prompt's
// next-token logits to `out` (float32, prompts × vocab). `--onnx DIR`: afterwards loads the ONNX export of the same
// weights and writes its logits for the same prompts to `out.onnx`. Prints one JSON line.
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel, RunRequest } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { Sfc32 } from '../catalog/bundled/prng.js';
import type { QuantDtype } from '../gpu-agent/runtime/formats.js';

const [dir, dtype, out, prompts, tokens, onnxFlag, onnxDir] = process.argv.slice(2);
const MIB = 1024 * 1024;

function request(vocab: number): RunRequest {
  const rng = new Sfc32(11);
  const ids = () => Array.from({ length: Number(tokens) }, () => Math.floor(rng.next() * (vocab - 1)));
  return {
    invokes: Array.from({ length: Number(prompts) }, () => ({
      tokens: ids(),
      block: 'async (m) => (await m.output).slice(0, -1)',
    })),
  };
}

async function logits(hm: HostedModel): Promise<{ data: Float32Array; ms: number[] }> {
  const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
  const req = request(hm.manifest().vocabSize);
  const ms: number[] = [];
  let r: Awaited<ReturnType<HostedModel['run']>> | undefined;
  for (let i = 0; i < 2; i++) {
    const t = performance.now();
    r = await hm.run(req, open);
    ms.push(performance.now() - t);
  }
  const vocab = hm.manifest().vocabSize;
  const data = new Float32Array(r!.invokes.length * vocab);
  r!.invokes.forEach((inv, i) => {
    const t = inv.result.tensors[0]!;
    data.set(new Float32Array(t.data.buffer, t.data.byteOffset, vocab), i * vocab);
  });
  return { data, ms };
}

const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const before = process.memoryUsage().rss;
const t0 = performance.now();
const hm = await loadModel(dir!, {
  key: `bench-${dtype}`,
  ...(dtype === 'fp32' ? {} : { quantize: dtype as QuantDtype }),
});
const loadS = (performance.now() - t0) / 1000;
await hm.run(
  { invokes: [{ tokens: [1, 2, 3, 4], block: 'async (m) => (await m.output).slice(0, -1).argmax()' }] },
  () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
);
gc?.();
const after = process.memoryUsage();
const rssMb = (after.rss - before) / MIB;
// Of the process: JS heap and buffers (the tokenizer, the graph, the manifest) — the rest is onnxruntime's.
const jsMb = (after.heapTotal + after.external) / MIB;
const mine = await logits(hm);
writeFileSync(out!, mine.data);
const weightsMb = hm.weightsBytes / MIB;
await hm.close();
let onnxMs: number[] | undefined;
if (onnxFlag === '--onnx') {
  const ox = await loadModel(onnxDir!, { key: 'bench-onnx' });
  const theirs = await logits(ox);
  writeFileSync(`${out}.onnx`, theirs.data);
  onnxMs = theirs.ms;
  await ox.close();
}
console.log(
  JSON.stringify({ dtype, loadS, rssMb, jsMb, weightsMb, forwardMs: mine.ms, ...(onnxMs ? { onnxMs } : {}) }),
);
process.exit(0);
