// The graph inputs the runtime knows how to feed, built from a padded batch of token rows.
//   input_ids                 [batch, seq] int64, the pad token on padding
//   attention_mask            [batch, seq] int64, 0 on padding
//   position_ids              [batch, seq] int64, cumsum(mask) - 1 with padding at 1 (as transformers' generate does)
//   token_type_ids            [batch, seq] int64, zeros (one segment)
//   past_key_values.<i>.key   [batch, heads, past, head_dim] (optimum's with-past layout) and the carried K/V the
//   past_key_values.<i>.value  runtime adds to exports without them (generation/kv-carry.ts): empty for a whole
//   ndif.past.<i>.key|value    sequence, the cache of the earlier steps in cached generation (generation/)
//   ndif.past_bias            [batch, 1, …, keys]: 0, or the lowest value at padded past positions
// Rows are padded on the side the model needs (`InputPlan.padding`, decided at load by model-interface.ts).
import { OrtTensorCtor } from '../ort/session.js';
import type { OrtTensor } from '../ort/session.js';
import type { ValueInfoProto } from '../onnx/types.js';
import { CARRY_BIAS, isCacheInput, isExportPast } from './cache-names.js';

export const SUPPORTED_INPUTS = [
  'input_ids',
  'attention_mask',
  'position_ids',
  'token_type_ids',
  'past_key_values.<layer>.key',
  'past_key_values.<layer>.value',
] as const;

const PLAIN = new Set(['input_ids', 'attention_mask', 'position_ids', 'token_type_ids']);

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
  /** Cache inputs (the export's past_key_values, or the carried K/V): empty when a whole sequence runs. */
  past: PastInput[];
  /** The carried K/V's bias input, when the graph was rewritten to carry them. */
  bias: { rank: number; elemType: number } | null;
}

/** What one forward pass is fed: `seq` new tokens per row, after `pastLen` cached positions. */
export interface FeedSpec {
  batch: number;
  seq: number;
  /** [batch, seq] token ids and positions. */
  ids: BigInt64Array;
  positions: BigInt64Array;
  /** [batch, maskLen] attention mask (maskLen: seq, or pastLen + seq for exports whose mask spans the past). */
  mask: BigInt64Array;
  maskLen: number;
  pastLen: number;
  /** The cache of earlier steps by input name; absent names are fed empty. */
  past?: Map<string, OrtTensor>;
  /** [batch, pastLen + seq] values of the carried K/V's bias (absent: zeros). */
  bias?: Float32Array | Uint16Array;
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
  if (!isExportPast(v.name)) return `${v.name} is not an input the runtime feeds`;
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
    .filter((v) => isCacheInput(v.name) && v.name !== CARRY_BIAS)
    .map((v) => ({
      name: v.name,
      elemType: v.type?.tensor_type?.elem_type ?? 1,
      dims: (v.type?.tensor_type?.shape?.dim ?? []).map((d) =>
        typeof d.dim_value === 'number' && d.dim_value > 0 ? d.dim_value : -1,
      ),
    }));
  const b = graphInputs.find((v) => v.name === CARRY_BIAS);
  const bias = b
    ? { rank: b.type?.tensor_type?.shape?.dim?.length ?? 4, elemType: b.type?.tensor_type?.elem_type ?? 1 }
    : null;
  return { names: graphInputs.map((v) => v.name), past, bias };
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

const ORT_TYPE: Record<number, 'float32' | 'float16'> = { 1: 'float32', 10: 'float16' };

/** A whole padded batch as one pass from an empty cache. */
export function feedsFor(plan: InputPlan, b: PaddedBatch): Record<string, OrtTensor> {
  return stepFeeds(plan, {
    batch: b.batch,
    seq: b.seq,
    ids: b.ids,
    positions: positions(b.mask, b.batch, b.seq),
    mask: b.mask,
    maskLen: b.seq,
    pastLen: 0,
  });
}

export function stepFeeds(plan: InputPlan, f: FeedSpec): Record<string, OrtTensor> {
  const dims = [f.batch, f.seq];
  const feeds: Record<string, OrtTensor> = {};
  for (const name of plan.names) {
    if (name === 'input_ids') feeds[name] = new OrtTensorCtor('int64', f.ids, dims);
    else if (name === 'attention_mask') feeds[name] = new OrtTensorCtor('int64', f.mask, [f.batch, f.maskLen]);
    else if (name === 'token_type_ids')
      feeds[name] = new OrtTensorCtor('int64', new BigInt64Array(f.batch * f.seq), dims);
    else if (name === 'position_ids') feeds[name] = new OrtTensorCtor('int64', f.positions, dims);
    else if (name === CARRY_BIAS) {
      const keys = f.pastLen + f.seq;
      const type = ORT_TYPE[plan.bias!.elemType] ?? 'float32';
      const shape = [f.batch, ...Array.from({ length: plan.bias!.rank - 2 }, () => 1), keys];
      const data = f.bias ?? (type === 'float16' ? new Uint16Array(f.batch * keys) : new Float32Array(f.batch * keys));
      feeds[name] = new OrtTensorCtor(type, data as Float32Array, shape);
    } else {
      const cached = f.past?.get(name);
      if (cached) {
        feeds[name] = cached;
        continue;
      }
      const past = plan.past.find((p) => p.name === name);
      if (!past)
        throw new Error(`model input ${name} is not one the runtime can feed (${SUPPORTED_INPUTS.join(', ')})`);
      const shape = past.dims.map((d, i) => (i === 0 ? f.batch : Math.max(d, 0)));
      const type = ORT_TYPE[past.elemType] ?? 'float32';
      feeds[name] = new OrtTensorCtor(type, type === 'float16' ? new Uint16Array(0) : new Float32Array(0), shape);
    }
  }
  return feeds;
}

/** cumsum(mask) − 1 on real tokens, 1 on padding (as transformers' generate does), for [batch, seq] rows. */
export function positions(mask: BigInt64Array, batch: number, seq: number): BigInt64Array {
  const pos = new BigInt64Array(batch * seq);
  for (let i = 0; i < batch; i++) {
    let c = 0n;
    for (let j = 0; j < seq; j++) {
      const k = i * seq + j;
      pos[k] = mask[k] === 1n ? c++ : 1n;
    }
  }
  return pos;
}
