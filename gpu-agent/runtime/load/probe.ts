// Learns every tensor's element type and symbolic shape by running the whole graph a few times on tiny inputs
// with every node output fetched. The probe session is unoptimised (so any intermediate can be fetched safely)
// and is thrown away afterwards; results never come from it.
import { encodeModel } from '../onnx/codec.js';
import { QUANTIZED_PLUMBING } from '../graph/source-ops.js';
import type { ModelProto } from '../onnx/types.js';
import type { ModelGraph } from '../graph/model-graph.js';
import type { WeightStore } from './weights.js';
import { createSession } from '../ort/session.js';
import type { SessionSettings } from '../ort/session.js';
import { feedsFor, inputPlan, padRows } from '../graph/model-inputs.js';
import { ModelLoadError } from '../errors.js';
import { fitDim } from './dims.js';
import type { DimFit, ProbePoint } from './dims.js';
import { planSegment, segmentModel } from '../segments/segment-model.js';

export interface TensorFacts {
  /** ONNX element type. */
  elemType: number;
  /** One fit per dimension (null where no integer fit in batch and sequence explains it). */
  dims: Array<DimFit | null>;
}

const ORT_TO_ONNX: Record<string, number> = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  string: 8,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
};

export function onnxElemType(ortType: string): number {
  const t = ORT_TO_ONNX[ortType];
  if (t === undefined) throw new Error(`unsupported tensor type ${ortType}`);
  return t;
}

/** Batch-1 first, so a model that only fails at batch > 1 is told apart (a batch fixed by the export). */
function probePoints(maxSeq: number): ProbePoint[] {
  const pts: Array<[number, number]> = [
    [1, 2],
    [2, 3],
    [1, 4],
    [3, 2],
    [2, 5],
  ];
  return pts.map(([b, t]) => ({ batch: b, seq: Math.min(t, maxSeq) }));
}

export async function probeTensors(
  base: ModelProto,
  g: ModelGraph,
  weights: WeightStore,
  settings: SessionSettings,
  maxSeq: number,
): Promise<Map<string, TensorFacts>> {
  const names: string[] = [];
  g.writes.forEach((ws, k) => {
    // A quantized replica's dequantized weights (hf/graph-context.ts) are no activations: fetching them would copy
    // every weight out in float32 on each probe run (12 s a run for GPT-2 small at int8).
    if (!g.constants.has(k) && g.nodes[k]!.doc_string !== QUANTIZED_PLUMBING) names.push(...ws);
  });
  const graphOutputs = new Set(g.graphOutputs.map((v) => v.name));
  const plan = planSegment(g, {
    start: 0,
    end: g.nodes.length,
    extraOutputs: names.filter((n) => !graphOutputs.has(n)),
  });
  const model = segmentModel(base, g, weights.initializers, plan, () => undefined);
  // Unpacked MatMulNBits weights are dequantized whole on every call (0.8 s a probe run for GPT-2 small at
  // int8, against 0.05 s packed): a quantized model's probe packs them (a copy of the small codes, freed after).
  const quantized = model.graph!.node!.some((n) => n.op_type === 'MatMulNBits');
  const session = await createSession(encodeModel(model), { ...settings, level: 'disabled', prepack: quantized });
  const inputs = inputPlan(g.graphInputs);
  const points = probePoints(maxSeq);
  const shapes = new Map<string, number[][]>();
  const types = new Map<string, number>();
  try {
    let ranBatchOne = false;
    for (const p of points) {
      const rows = Array.from({ length: p.batch }, (_, i) =>
        Array.from({ length: p.seq }, (_, j) => (i * 7 + j * 3 + 1) % 50),
      );
      let out: Awaited<ReturnType<typeof session.run>>;
      try {
        out = await session.run(feedsFor(inputs, padRows(rows, 0, 'left')));
      } catch (e) {
        if (p.batch > 1 && ranBatchOne) {
          throw new ModelLoadError(
            'MODEL_STATIC_DIMS',
            `the model runs with batch 1 but fails with batch ${p.batch} (${(e as Error).message.slice(0, 300)}): the export fixed the batch size from a batch-1 example. Export with a batch >= 2 example and dynamic_shapes`,
            {
              cause: e,
              details: { batch: p.batch, sequence: p.seq },
            },
          );
        }
        throw e;
      }
      if (p.batch === 1) ranBatchOne = true;
      for (const [name, t] of Object.entries(out)) {
        types.set(name, onnxElemType(t.type));
        (shapes.get(name) ?? shapes.set(name, []).get(name)!).push([...t.dims]);
      }
    }
  } finally {
    await session.release();
  }
  const facts = new Map<string, TensorFacts>();
  for (const [name, observed] of shapes) {
    const rank = observed[0]!.length;
    const sameRank = observed.every((s) => s.length === rank);
    const dims = Array.from({ length: sameRank ? rank : 0 }, (_, d) =>
      fitDim(
        points,
        observed.map((s) => s[d]!),
      ),
    );
    facts.set(name, { elemType: types.get(name)!, dims });
  }
  for (const v of g.graphInputs) {
    const elem = v.type?.tensor_type?.elem_type;
    if (elem !== undefined && !facts.has(v.name)) {
      facts.set(v.name, {
        elemType: elem,
        dims: [
          { k: 0, b: 1, t: 0, bt: 0 },
          { k: 0, b: 0, t: 1, bt: 0 },
        ],
      });
    }
  }
  return facts;
}
