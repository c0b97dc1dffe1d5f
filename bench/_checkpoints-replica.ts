// One replica of the checkpoints bench, in its own process so its memory is its own: loads a GPT-2-small-shape
// snapshot (float32, or quantized to `dtype`), answers one short prompt, measures its RSS over the process's
// before loading, then runs the bench's prompts (each alone in a row of one batch) and writes each prompt's
// next-token logits to `out` (float32, prompts × vocab). Prints one JSON line.
//   --onnx DIR      afterwards loads the ONNX export of the same weights and writes its logits to `out.onnx`
//   --against DIR   afterwards loads DIR (the float32 snapshot) in this process too and times the prompts' batch
//                   on both, alternating, best of `rounds` each (one process, so the machine's load hits both alike)
// `dtype` baseline: no model — onnxruntime's environment, one session of a one-node graph and one run, measured the
// same way (what every replica process holds whatever it serves; the bench subtracts it).
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import ort from 'onnxruntime-node';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel, RunRequest } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { Sfc32 } from '../catalog/bundled/prng.js';
import { TensorDataType, encodeModel, tensorInfo } from '../gpu-agent/runtime/formats.js';
import type { QuantDtype } from '../gpu-agent/runtime/formats.js';

const args = process.argv.slice(2);
const [dir, dtype, out, prompts, tokens] = args;
const flag = (name: string) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? undefined : args[i + 1];
};
const MIB = 1024 * 1024;
const gc = (globalThis as { gc?: () => void }).gc;

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

const open = (hm: HostedModel) => () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });

async function logits(hm: HostedModel): Promise<{ data: Float32Array; ms: number }> {
  const req = request(hm.manifest().vocabSize);
  const t = performance.now();
  const r = await hm.run(req, open(hm));
  const ms = performance.now() - t;
  const vocab = hm.manifest().vocabSize;
  const data = new Float32Array(r.invokes.length * vocab);
  r.invokes.forEach((inv, i) => {
    const x = inv.result.tensors[0]!;
    data.set(new Float32Array(x.data.buffer, x.data.byteOffset, vocab), i * vocab);
  });
  return { data, ms };
}

async function baseline(): Promise<void> {
  gc?.();
  const before = process.memoryUsage().rss;
  const model = encodeModel({
    ir_version: 8,
    opset_import: [{ domain: '', version: 17 }],
    graph: {
      name: 'baseline',
      node: [{ op_type: 'Identity', input: ['x'], output: ['y'] }],
      input: [tensorInfo('x', TensorDataType.FLOAT, ['n'])],
      output: [tensorInfo('y', TensorDataType.FLOAT, ['n'])],
    },
  });
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'basic',
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  await session.run({ x: new ort.Tensor('float32', new Float32Array(4), [4]) });
  gc?.();
  console.log(JSON.stringify({ dtype: 'baseline', rssMb: (process.memoryUsage().rss - before) / MIB }));
  process.exit(0);
}

if (dtype === 'baseline') await baseline();

gc?.();
const before = process.memoryUsage().rss;
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const hm = await loadModel(dir!, {
  key: `bench-${dtype}`,
  ...(dtype === 'fp32' ? {} : { quantize: dtype as QuantDtype }),
});
const loadS = (performance.now() - t0) / 1000;
const load = process.cpuUsage(cpu0);
// CPU seconds of every thread of the process while loading: the load's wall time on an idle machine.
const loadCpuS = (load.user + load.system) / 1e6;
await hm.run(
  { invokes: [{ tokens: [1, 2, 3, 4], block: 'async (m) => (await m.output).slice(0, -1).argmax()' }] },
  open(hm),
);
gc?.();
const after = process.memoryUsage();
const rssMb = (after.rss - before) / MIB;
// Of the process: JS heap and buffers (the tokenizer, the graph, the manifest) — the rest is onnxruntime's.
const jsMb = (after.heapTotal + after.external) / MIB;
const mine = await logits(hm);
writeFileSync(out!, mine.data);
const weightsMb = hm.weightsBytes / MIB;
const cache = hm.manifest().generation?.cache;
const result: Record<string, unknown> = { dtype, loadS, loadCpuS, rssMb, jsMb, weightsMb, cache, forwardMs: mine.ms };
const onnxDir = flag('onnx');
if (onnxDir) {
  const ox = await loadModel(onnxDir, { key: 'bench-onnx' });
  const theirs = await logits(ox);
  writeFileSync(`${out}.onnx`, theirs.data);
  result.onnxMs = theirs.ms;
  await ox.close();
}
const against = flag('against');
if (against) {
  const fp = await loadModel(against, { key: 'bench-fp32' });
  const rounds = Number(flag('rounds') ?? 2);
  let mineMs = Number.POSITIVE_INFINITY;
  let fpMs = Number.POSITIVE_INFINITY;
  for (let i = 0; i < rounds; i++) {
    fpMs = Math.min(fpMs, (await logits(fp)).ms);
    mineMs = Math.min(mineMs, (await logits(hm)).ms);
  }
  result.timed = { mine: mineMs, fp32: fpMs };
  await fp.close();
}
await hm.close();
console.log(JSON.stringify(result));
process.exit(0);
