// The graph inputs the runtime knows how to feed, built from a padded batch of token rows.
//   input_ids                 [batch, seq] int64, the pad token on padding
//   attention_mask            [batch, seq] int64, 0 on padding
//   position_ids              [batch, seq] int64, cumsum(mask) - 1 with padding at 1 (as transformers' generate does)
//   token_type_ids            [batch, seq] int64, zeros (one segment)
//   past_key_values.<i>.key   [batch, heads, 0, head_dim] (optimum's with-past layout): an empty cache, so the
//   past_key_values.<i>.value  whole sequence runs as the prompt
// Rows are padded on the side the model needs (`InputPlan.padding`, decided at load by model-interface.ts).
import { OrtTensorCtor } from './ort/session.js';
import type { OrtTensor } from './ort/session.js';
import type { ValueInfoProto } from './onnx/types.js';

export const SUPPORTED_INPUTS = ['input_ids', 'attention_mask', 'position_ids', 'token_type_ids', 'past_key_values.<layer>.key', 'past_key_values.<layer>.value'] as const;

const PLAIN = new Set(['input_ids', 'attention_mask', 'position_ids', 'token_type_ids']);
const PAST = /^past_key_values\.\d+\.(key|value)$/;

/** Where padding goes: left (decoders: the last position is every row's next-token position), right (encoders whose graph numbers positions itself), or none (rows must have one length). */
export type PaddingSide = 'left' | 'right' | 'none';

export interface PastInput {
  name: string;
  elemType: number;
  /** Declared dims with the past length (and batch) as -1. */
  dims: number[];
}

export interface InputPlan {
  names: string[];
  past: PastInput[];
}

export interface PaddedBatch {
  batch: number;
  seq: number;
  side: 'left' | 'right';
  /** Real tokens of each row. */
  lengths: number[];
  /** Row-major [batch, seq]. */
  ids: BigInt64Array;
  mask: BigInt64Array;
}

/** Why a graph input cannot be fed (undefined when it can). */
export function unfeedable(v: ValueInfoProto): string | undefined {
  if (PLAIN.has(v.name)) return undefined;
  if (!PAST.test(v.name)) return `${v.name} is not an input the runtime feeds`;
  const dims = v.type?.tensor_type?.shape?.dim ?? [];
  if (dims.length !== 4) return `${v.name} must be declared [batch, heads, past_sequence, head_dim]`;
  const fixed = dims.filter((d) => typeof d.dim_value === 'number' && d.dim_value > 0).length;
  if (fixed !== 2 || dims[0]?.dim_value !== undefined || dims[2]?.dim_value !== undefined) {
    return `${v.name} must have symbolic batch and past-sequence dims and fixed heads and head_dim`;
  }
  return undefined;
}

export function inputPlan(graphInputs: ValueInfoProto[]): InputPlan {
  const past = graphInputs
    .filter((v) => PAST.test(v.name))
    .map((v) => ({
      name: v.name,
      elemType: v.type?.tensor_type?.elem_type ?? 1,
      dims: (v.type?.tensor_type?.shape?.dim ?? []).map((d) => (typeof d.dim_value === 'number' && d.dim_value > 0 ? d.dim_value : -1)),
    }));
  return { names: graphInputs.map((v) => v.name), past };
}

/** Pads each row to the longest one on `side`. */
export function padRows(rows: number[][], padId: number, side: 'left' | 'right' = 'left'): PaddedBatch {
  const batch = rows.length;
  const seq = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(batch * seq).fill(BigInt(padId));
  const mask = new BigInt64Array(batch * seq);
  rows.forEach((r, i) => {
    const off = i * seq + (side === 'left' ? seq - r.length : 0);
    r.forEach((tok, j) => {
      ids[off + j] = BigInt(tok);
      mask[off + j] = 1n;
    });
  });
  return { batch, seq, side, lengths: rows.map((r) => r.length), ids, mask };
}

/** Position of row `row`'s last real token in the padded batch. */
export function lastRealPosition(b: PaddedBatch, row: number): number {
  return b.side === 'left' ? b.seq - 1 : b.lengths[row]! - 1;
}

const ORT_TYPE: Record<number, 'float32' | 'float16'> = { 1: 'float32', 10: 'float16' };

export function feedsFor(plan: InputPlan, b: PaddedBatch): Record<string, OrtTensor> {
  const dims = [b.batch, b.seq];
  const feeds: Record<string, OrtTensor> = {};
  for (const name of plan.names) {
    if (name === 'input_ids') feeds[name] = new OrtTensorCtor('int64', b.ids, dims);
    else if (name === 'attention_mask') feeds[name] = new OrtTensorCtor('int64', b.mask, dims);
    else if (name === 'token_type_ids') feeds[name] = new OrtTensorCtor('int64', new BigInt64Array(b.batch * b.seq), dims);
    else if (name === 'position_ids') feeds[name] = new OrtTensorCtor('int64', positions(b), dims);
    else {
      const past = plan.past.find((p) => p.name === name);
      if (!past) throw new Error(`model input ${name} is not one the runtime can feed (${SUPPORTED_INPUTS.join(', ')})`);
      const shape = past.dims.map((d, i) => (i === 0 ? b.batch : d < 0 ? 0 : d));
      const type = ORT_TYPE[past.elemType] ?? 'float32';
      feeds[name] = new OrtTensorCtor(type, type === 'float16' ? new Uint16Array(0) : new Float32Array(0), shape);
    }
  }
  return feeds;
}

function positions(b: PaddedBatch): BigInt64Array {
  const pos = new BigInt64Array(b.batch * b.seq);
  for (let i = 0; i < b.batch; i++) {
    let c = 0n;
    for (let j = 0; j < b.seq; j++) {
      const k = i * b.seq + j;
      pos[k] = b.mask[k] === 1n ? c++ : 1n;
    }
  }
  return pos;
}
