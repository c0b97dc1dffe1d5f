// The graph inputs the runtime knows how to feed, built from a left-padded batch of token rows.
//   input_ids       [batch, seq] int64, pad token on the left
//   attention_mask  [batch, seq] int64, 0 on padding
//   position_ids    [batch, seq] int64, cumsum(mask) - 1 with padding at 1 (as transformers' generate does)
//   token_type_ids  [batch, seq] int64, zeros
import { OrtTensorCtor } from './ort/session.js';
import type { OrtTensor } from './ort/session.js';

export const SUPPORTED_INPUTS = ['input_ids', 'attention_mask', 'position_ids', 'token_type_ids'] as const;

export interface PaddedBatch {
  batch: number;
  seq: number;
  /** Row-major [batch, seq]. */
  ids: BigInt64Array;
  mask: BigInt64Array;
}

/** Left-pads each row to the longest one. */
export function padLeft(rows: number[][], padId: number): PaddedBatch {
  const batch = rows.length;
  const seq = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(batch * seq).fill(BigInt(padId));
  const mask = new BigInt64Array(batch * seq);
  rows.forEach((r, i) => {
    const off = i * seq + (seq - r.length);
    r.forEach((tok, j) => {
      ids[off + j] = BigInt(tok);
      mask[off + j] = 1n;
    });
  });
  return { batch, seq, ids, mask };
}

export function feedsFor(inputNames: string[], b: PaddedBatch): Record<string, OrtTensor> {
  const dims = [b.batch, b.seq];
  const feeds: Record<string, OrtTensor> = {};
  for (const name of inputNames) {
    if (name === 'input_ids') feeds[name] = new OrtTensorCtor('int64', b.ids, dims);
    else if (name === 'attention_mask') feeds[name] = new OrtTensorCtor('int64', b.mask, dims);
    else if (name === 'token_type_ids') feeds[name] = new OrtTensorCtor('int64', new BigInt64Array(b.batch * b.seq), dims);
    else if (name === 'position_ids') {
      const pos = new BigInt64Array(b.batch * b.seq);
      for (let i = 0; i < b.batch; i++) {
        let c = 0n;
        for (let j = 0; j < b.seq; j++) {
          const k = i * b.seq + j;
          if (b.mask[k] === 1n) pos[k] = c++;
          else pos[k] = 1n;
        }
      }
      feeds[name] = new OrtTensorCtor('int64', pos, dims);
    } else throw new Error(`model input ${name} is not one the runtime can feed (${SUPPORTED_INPUTS.join(', ')})`);
  }
  return feeds;
}
