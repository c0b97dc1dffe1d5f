// `npm run bench -- param-inputs`: the road not taken for parameter swaps. Every float initializer of GPT-2-small
// shape also declared as a graph input — so onnxruntime lets a request feed its own value for any parameter, one
// session for all — against the model as it is (what plain requests run). Same settings as the runtime's sessions
// (basic, one thread, pre-packing on), 32 tokens, interleaved runs, medians.
//   overridable_over_plain   a forward of the overridable model over the plain one
//   bit_identical            whether its logits have the plain model's bits
//   create_ms, create_overridable_ms   session creation (pre-packing only the weights that are not inputs)
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { decodeModel, encodeModel } from '../gpu-agent/runtime/formats.js';
import { ensureBenchModel } from './bench-model.js';
import { median, numberArg, round } from './_numbers.js';

const MODEL = 'gpt2-small-random';

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const rounds = numberArg(args, 'rounds', 8);
  const { dir } = ensureBenchModel(MODEL);
  const base = decodeModel(readFileSync(join(dir, 'model.onnx')));
  const over = structuredClone(base);
  const graph = over.graph!;
  let overridable = 0;
  for (const t of graph.initializer ?? []) {
    if (t.data_type !== 1 || (t.dims ?? []).length === 0) continue;
    graph.input = [
      ...(graph.input ?? []),
      {
        name: t.name!,
        type: { tensor_type: { elem_type: 1, shape: { dim: t.dims!.map((d) => ({ dim_value: d })) } } },
      },
    ];
    overridable++;
  }
  const create = async (m: typeof base) => {
    const t = performance.now();
    const s = await ort.InferenceSession.create(encodeModel(m), {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'basic',
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      logSeverityLevel: 3,
      extra: { session: { model_external_initializers_file_folder_path: dir } },
    });
    return { s, ms: performance.now() - t };
  };
  const plain = await create(base);
  const withInputs = await create(over);
  const feeds: Record<string, ort.Tensor> = {};
  for (const n of plain.s.inputNames)
    feeds[n] =
      n === 'input_ids'
        ? new ort.Tensor(
            'int64',
            BigInt64Array.from({ length: 32 }, (_, i) => BigInt(100 + i)),
            [1, 32],
          )
        : n === 'attention_mask'
          ? new ort.Tensor('int64', new BigInt64Array(32).fill(1n), [1, 32])
          : new ort.Tensor('float32', new Float32Array(0), [1, 12, 0, 64]);
  const out = plain.s.outputNames[0]!;
  const a: number[] = [];
  const b: number[] = [];
  let same = true;
  for (let i = 0; i < rounds; i++) {
    let t = performance.now();
    const ra = await plain.s.run(feeds);
    a.push(performance.now() - t);
    t = performance.now();
    const rb = await withInputs.s.run(feeds);
    b.push(performance.now() - t);
    const x = ra[out]!.data as Float32Array;
    const y = rb[out]!.data as Float32Array;
    if (x.length !== y.length || x.some((v, k) => v !== y[k])) same = false;
  }
  await plain.s.release();
  await withInputs.s.release();
  return {
    bench: 'param-inputs',
    overridable_over_plain: round(median(b) / median(a), 4),
    bit_identical: same,
    overridable_parameters: overridable,
    plain_ms: round(median(a)),
    overridable_ms: round(median(b)),
    create_ms: round(plain.ms),
    create_overridable_ms: round(withInputs.ms),
    rounds,
    total_s: round((performance.now() - t0) / 1000),
  };
}
