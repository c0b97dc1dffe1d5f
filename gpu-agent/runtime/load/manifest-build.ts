// Builds the model-level manifest (protocol/manifest.ts) from the graph analysis, the probed tensor facts and
// config.json.
import { MANIFEST_FORMAT } from '../../../protocol/manifest.js';
import type { Manifest, ManifestModule, ManifestParameter, ManifestTensor } from '../../../protocol/manifest.js';
import type { Dtype } from '../../../protocol/interleave.js';
import type { ModelGraph, ModuleNode } from '../graph/model-graph.js';
import { moduleCallPlan } from '../interleave/module-call.js';
import { FUSED_ATTENTION_OPS } from '../graph/source-ops.js';
import type { TensorProto } from '../onnx/types.js';
import { isCacheInput, isCacheOutput } from '../graph/cache-names.js';
import type { AddressTable } from '../graph/addresses.js';
import type { ParameterInfo } from '../graph/parameters.js';
import type { TensorFacts } from './probe.js';
import { formatDim } from './dims.js';
import { tensorBytes } from '../onnx/tensor-bytes.js';

const ONNX_DTYPE: Record<number, Dtype | string> = {
  1: 'float32',
  2: 'uint8',
  3: 'int8',
  4: 'uint16',
  5: 'int16',
  6: 'int32',
  7: 'int64',
  8: 'string',
  9: 'bool',
  10: 'float16',
  11: 'float64',
  12: 'uint32',
  13: 'uint64',
  16: 'bfloat16',
};

export function dtypeOf(elemType: number): Dtype | string {
  return ONNX_DTYPE[elemType] ?? `onnx-type-${elemType}`;
}

export function manifestTensor(name: string, facts: TensorFacts | undefined): ManifestTensor {
  const dims = facts?.dims ?? [];
  const d0 = dims[0];
  return {
    name,
    dtype: facts ? dtypeOf(facts.elemType) : 'unknown',
    dims,
    symbolic: dims.map((d) => (d ? formatDim(d) : '?')),
    batched: !!d0 && d0.k === 0 && d0.b === 1 && d0.t === 0 && d0.bt === 0,
  };
}

export interface ModelConfigFacts {
  vocabSize: number;
  maxPositions: number;
  eosTokenId: number | null;
  /** Every EOS id (config.json's eos_token_id may be a list; generation_config.json's wins when present). */
  eosTokenIds: number[];
  padTokenId: number;
}

export function configFacts(
  config: Record<string, unknown>,
  g: ModelGraph,
  facts: Map<string, TensorFacts>,
): ModelConfigFacts {
  const num = (...keys: string[]): number | undefined => {
    for (const k of keys) if (typeof config[k] === 'number') return config[k] as number;
    return undefined;
  };
  const logits = g.graphOutputs[0] ? facts.get(g.graphOutputs[0].name) : undefined;
  const lastDim = logits?.dims[logits.dims.length - 1];
  const vocabFromGraph = lastDim && lastDim.b === 0 && lastDim.t === 0 && lastDim.bt === 0 ? lastDim.k : undefined;
  const ids = (v: unknown): number[] =>
    typeof v === 'number' ? [v] : Array.isArray(v) ? v.filter((x): x is number => Number.isInteger(x)) : [];
  const gen = (config.generation_config ?? {}) as Record<string, unknown>;
  const eosTokenIds = ids(gen.eos_token_id).length > 0 ? ids(gen.eos_token_id) : ids(config.eos_token_id);
  const eos = num('eos_token_id') ?? eosTokenIds[0] ?? null;
  return {
    vocabSize: num('vocab_size') ?? vocabFromGraph ?? 0,
    maxPositions: num('n_positions', 'max_position_embeddings', 'n_ctx') ?? Number.MAX_SAFE_INTEGER,
    eosTokenId: eos,
    eosTokenIds,
    padTokenId: num('pad_token_id') ?? eos ?? 0,
  };
}

/** Element type holding most of the initializers' bytes. */
export function weightsDtype(initializers: Iterable<TensorProto>): string {
  const bytes = new Map<number, number>();
  for (const t of initializers) bytes.set(t.data_type ?? 0, (bytes.get(t.data_type ?? 0) ?? 0) + tensorBytes(t));
  let best = 1;
  for (const [type, n] of bytes) if (n > (bytes.get(best) ?? 0)) best = type;
  return dtypeOf(best);
}

export interface InterfaceFacts {
  padding: 'left' | 'right' | 'none';
  logits: string | null;
  generation?: Manifest['generation'];
  memory?: Manifest['memory'];
  /** The weights' type as exported, when the graph served was converted (a float16 export served as float32). */
  storedDtype?: string;
}

/** Why a module cannot be called, for the block side to refuse before it checks inputs (lists and the root excepted). */
function notCallable(g: ModelGraph, m: ModuleNode): { notCallable?: string } {
  if (m.path === '' || m.isList || m.inputs.length === 0) return {};
  const plan = moduleCallPlan(g, m);
  return typeof plan === 'string' ? { notCallable: plan } : {};
}

/** The fused attention ops among a module's own nodes (its attention pattern is then not in the graph). */
function fusedOpsOf(g: ModelGraph, m: ModuleNode): { fusedOps?: string[] } {
  if (m.isList || !m.contiguous) return {};
  const ops = new Set<string>();
  for (let k = m.start; k < m.end; k++) {
    const n = g.nodes[k]!;
    if (g.scopes[k] === m.path && FUSED_ATTENTION_OPS.has(n.op_type))
      ops.add(`${n.domain ? `${n.domain}.` : ''}${n.op_type}`);
  }
  return ops.size > 0 ? { fusedOps: [...ops] } : {};
}

export function buildManifest(
  key: string,
  g: ModelGraph,
  table: AddressTable,
  facts: Map<string, TensorFacts>,
  cfg: ModelConfigFacts,
  weightsBytes: number,
  parameters: Map<string, ParameterInfo>,
  iface: InterfaceFacts,
): Manifest {
  const paramsOf = new Map<string, ManifestParameter[]>();
  for (const p of parameters.values()) {
    const list = paramsOf.get(p.module) ?? paramsOf.set(p.module, []).get(p.module)!;
    list.push({ name: p.name, dtype: dtypeOf(p.elemType), shape: p.shape, ...(p.tiedTo ? { tiedTo: p.tiedTo } : {}) });
  }
  const served = weightsDtype(g.initializers.values());
  const modules: ManifestModule[] = [...g.modules.values()]
    .sort((a, b) => a.start - b.start || a.path.length - b.path.length)
    .map((m) => ({
      path: m.path,
      children: m.children,
      list: m.isList,
      outputs: m.isList ? [] : m.outputs.map((t) => manifestTensor(t, facts.get(t))),
      inputs: m.isList ? [] : m.inputs.map((t) => manifestTensor(t, facts.get(t))),
      contiguous: m.contiguous,
      ...notCallable(g, m),
      ...fusedOpsOf(g, m),
      ...(paramsOf.has(m.path) ? { parameters: paramsOf.get(m.path)! } : {}),
    }));
  return {
    format: MANIFEST_FORMAT,
    model: key,
    vocabSize: cfg.vocabSize,
    maxPositions: cfg.maxPositions,
    weightsBytes,
    inputNames: g.graphInputs.map((v) => v.name).filter((t) => !isCacheInput(t)),
    outputNames: g.graphOutputs.map((v) => v.name).filter((t) => !isCacheOutput(t)),
    eosTokenId: cfg.eosTokenId,
    padTokenId: cfg.padTokenId,
    dtype: iface.storedDtype ?? served,
    ...(iface.storedDtype !== undefined && iface.storedDtype !== served ? { computeDtype: served } : {}),
    padding: iface.padding,
    logits: iface.logits,
    ...(iface.generation ? { generation: iface.generation } : {}),
    ...(iface.memory ? { memory: iface.memory } : {}),
    modules,
    order: table.points.map((p) => p.key),
  };
}
