// The inputs of each forward pass of a generation, and the cache between passes. Rows keep their padded history
// (ids and mask: left padding, then one position per step; a finished row gets the pad token, masked). The first
// pass runs every row's prompt; with the cache each later pass runs only the newest position, fed the keys and
// values of the earlier ones (the last pass's present outputs), else the whole history again.
import type { OrtTensor } from '../ort/session.js';
import type { InputPlan } from '../graph/model-inputs.js';
import { positions, stepFeeds } from '../graph/model-inputs.js';
import type { KvLayout } from './kv-layout.js';

const FLOAT32_LOWEST = -3.4028234663852886e38;
const FLOAT16_LOWEST_BITS = 0xfbff;

export class KvFeeder {
  readonly ids: number[][];
  readonly mask: number[][];
  private past = new Map<string, OrtTensor>();
  private pastLen = 0;
  private passes = 0;

  constructor(
    private readonly plan: InputPlan,
    private readonly layout: KvLayout,
    /** Carry the cache (false: every pass runs the whole history). */
    readonly cached: boolean,
    prompts: number[][],
    padTokenId: number,
  ) {
    const width = Math.max(...prompts.map((p) => p.length));
    this.ids = prompts.map((p) => [...Array<number>(width - p.length).fill(padTokenId), ...p]);
    this.mask = prompts.map((p) => [...Array<number>(width - p.length).fill(0), ...p.map(() => 1)]);
  }

  get batch(): number {
    return this.ids.length;
  }

  get length(): number {
    return this.ids[0]!.length;
  }

  /** Positions the next pass runs (the whole history on the first pass or without the cache, else one). */
  get fedLength(): number {
    return this.cached && this.passes > 0 ? this.length - this.pastLen : this.length;
  }

  feeds(): Record<string, OrtTensor> {
    const batch = this.batch;
    const total = this.length;
    const incremental = this.cached && this.passes > 0;
    const from = incremental ? this.pastLen : 0;
    const seq = total - from;
    const ids = new BigInt64Array(batch * seq);
    for (let r = 0; r < batch; r++) for (let j = 0; j < seq; j++) ids[r * seq + j] = BigInt(this.ids[r]![from + j]!);
    let mask: BigInt64Array;
    let maskLen = total;
    let bias: Float32Array | Uint16Array | undefined;
    if (incremental && !this.layout.maskSpansPast) {
      // Carried K/V: the graph's own mask sees only the new positions (real: a 0 would mask every key through its
      // broadcast); the past's padding is in the bias.
      mask = new BigInt64Array(batch * seq).fill(1n);
      maskLen = seq;
      bias = this.biasFor(total);
    } else {
      mask = new BigInt64Array(batch * total);
      for (let r = 0; r < batch; r++) for (let j = 0; j < total; j++) mask[r * total + j] = BigInt(this.mask[r]![j]!);
    }
    let pos: BigInt64Array;
    if (!incremental) pos = positions(mask, batch, total);
    else {
      pos = new BigInt64Array(batch * seq);
      for (let r = 0; r < batch; r++) {
        // A masked position (a finished row's pad) still needs a position: the next one after its real tokens.
        let real = 0;
        for (let x = 0; x < from; x++) real += this.mask[r]![x]!;
        for (let j = 0; j < seq; j++) {
          pos[r * seq + j] = BigInt(real);
          real += this.mask[r]![from + j]!;
        }
      }
    }
    const feeds = stepFeeds(this.plan, {
      batch,
      seq,
      ids,
      positions: pos,
      mask,
      maskLen,
      pastLen: incremental ? this.pastLen : 0,
      ...(incremental ? { past: this.past } : {}),
      ...(bias ? { bias } : {}),
    });
    return feeds;
  }

  private biasFor(total: number): Float32Array | Uint16Array {
    const half = (this.plan.bias?.elemType ?? 1) === 10;
    const out = half ? new Uint16Array(this.batch * total) : new Float32Array(this.batch * total);
    for (let r = 0; r < this.batch; r++) {
      for (let j = 0; j < this.pastLen; j++) {
        if (this.mask[r]![j] === 0) out[r * total + j] = half ? FLOAT16_LOWEST_BITS : FLOAT32_LOWEST;
      }
    }
    return out;
  }

  /** After a pass: with the cache, its present outputs become the next pass's past. */
  absorb(table: Map<string, OrtTensor>): void {
    this.passes++;
    if (!this.cached) return;
    const next = new Map<string, OrtTensor>();
    for (const s of this.layout.slots) {
      const t = table.get(s.present);
      if (!t) throw new Error(`internal: the pass did not compute ${s.present} (the cache of ${s.past})`);
      next.set(s.past, t);
    }
    this.past = next;
    this.pastLen = this.length;
  }

  /** Appends one position to every row: its token, and whether it is real (a finished row's pad is masked). */
  append(tokens: readonly number[], real: readonly boolean[]): void {
    tokens.forEach((t, r) => {
      this.ids[r]!.push(t);
      this.mask[r]!.push(real[r] ? 1 : 0);
    });
  }
}
