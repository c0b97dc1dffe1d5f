// Chooses a row's next token from its last-position logits, in transformers' order: repetition penalty, then
// (when sampling) temperature, top-k, top-p, and a draw from the row's own seeded sfc32 stream. Greedy picks the
// highest logit (the lowest id on a tie). Everything is deterministic for a seed: integer PRNG, float64 math in a
// fixed order, ties broken by token id.
import type { GenerationOptions } from '../../../protocol/generation.js';
import { isSampling } from '../../../protocol/generation.js';
import { Sfc32 } from './sfc32.js';

export interface SamplerSettings {
  sampling: boolean;
  temperature: number;
  topK: number | undefined;
  topP: number | undefined;
  repetitionPenalty: number;
}

export function samplerSettings(o: GenerationOptions): SamplerSettings {
  return {
    sampling: isSampling(o),
    temperature: o.temperature !== undefined && o.temperature > 0 ? o.temperature : 1,
    topK: o.topK,
    topP: o.topP,
    repetitionPenalty: o.repetitionPenalty ?? 1,
  };
}

export class RowSampler {
  private readonly rng: Sfc32 | undefined;
  private scratch = new Float64Array(0);
  /** The row's tokens so far (its prompt and what this sampler chose), kept only for a repetition penalty. */
  private readonly seen: Set<number> | undefined;

  constructor(
    private readonly s: SamplerSettings,
    seed: number,
    prompt: readonly number[],
  ) {
    this.rng = s.sampling ? Sfc32.seeded(seed) : undefined;
    this.seen = s.repetitionPenalty !== 1 ? new Set(prompt) : undefined;
  }

  /** The next token from `logits[offset, offset + vocab)`. */
  choose(logits: ArrayLike<number>, offset: number, vocab: number): number {
    if (this.scratch.length !== vocab) this.scratch = new Float64Array(vocab);
    const x = this.scratch;
    for (let v = 0; v < vocab; v++) x[v] = logits[offset + v]!;
    const p = this.s.repetitionPenalty;
    if (this.seen !== undefined) {
      for (const t of this.seen) {
        if (t >= 0 && t < vocab) x[t] = x[t]! < 0 ? x[t]! * p : x[t]! / p;
      }
    }
    const token = this.rng ? this.sample(x) : argmax(x);
    this.seen?.add(token);
    return token;
  }

  private sample(x: Float64Array): number {
    const vocab = x.length;
    const t = this.s.temperature;
    let max = -Infinity;
    for (let v = 0; v < vocab; v++) {
      x[v] = x[v]! / t;
      if (x[v]! > max) max = x[v]!;
    }
    // Candidates in order of probability (ties by id). Top-k bounds them first; top-p needs only the head of the
    // order, so the order covers the tokens above a probability threshold lowered until they hold p of the mass.
    let total = 0;
    for (let v = 0; v < vocab; v++) {
      x[v] = Math.exp(x[v]! - max);
      total += x[v]!;
    }
    const k = Math.min(this.s.topK ?? vocab, vocab);
    const p = this.s.topP ?? 1;
    const head = candidateIds(x, total, k, p);
    const order = byProbability(x, head);
    let n = Math.min(order.length, k);
    if (p < 1) {
      let inTopK = 0;
      for (let i = 0; i < n; i++) inTopK += order[i]!;
      let kept = 0;
      let mass = 0;
      while (kept < n) {
        mass += order[kept]!;
        kept++;
        if (mass >= p * inTopK) break;
      }
      n = kept;
    }
    let sum = 0;
    for (let i = 0; i < n; i++) sum += order[i]!;
    const u = this.rng!.next53() * sum;
    let acc = 0;
    let at = n - 1;
    for (let i = 0; i < n; i++) {
      acc += order[i]!;
      if (u < acc) {
        at = i;
        break;
      }
    }
    return tokenAt(x, head, order, at);
  }
}

/** Token ids that can be in the top-k / top-p set (a superset, in id order); null: every id. */
export function candidateIds(w: Float64Array, total: number, k: number, p: number): number[] | null {
  const vocab = w.length;
  if (k >= vocab && p >= 1) return null;
  let max = 0;
  for (let v = 0; v < vocab; v++) if (w[v]! > max) max = w[v]!;
  for (let threshold = max * 1e-3; ; threshold *= 1e-3) {
    const out: number[] = [];
    let mass = 0;
    for (let v = 0; v < vocab; v++) {
      if (w[v]! >= threshold) {
        out.push(v);
        mass += w[v]!;
      }
    }
    // Every token outside `out` is below every token inside it, so `out` holds the top-k once it has k tokens
    // (ties at the threshold are all inside), and the nucleus once it holds p of the whole mass.
    if ((out.length >= k || k >= vocab) && (p >= 1 || mass >= p * total)) return out;
    if (threshold === 0 || out.length === vocab) return out;
    if (threshold < Number.MIN_VALUE) threshold = 0;
  }
}

/**
 * The probabilities of `ids` (null: every id), largest first, NaN (from NaN logits) last. The order, the sums over it
 * and so the draws are those of sorting the ids by probability with ties by id (a comparator sort, which took ~50 ms
 * a token over GPT-2's 50,257); only the values are sorted, by a radix sort of their bits, and `tokenAt` finds the id
 * of the drawn position.
 */
function byProbability(x: Float64Array, ids: readonly number[] | null): Float64Array {
  const n = ids === null ? x.length : ids.length;
  const order = new Float64Array(n);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const v = x[ids === null ? i : ids[i]!]!;
    if (!Number.isNaN(v)) order[m++] = v;
  }
  order.fill(Number.NaN, m);
  sortDescending(order.subarray(0, m));
  return order;
}

/**
 * Sorts non-negative doubles (probabilities) in place, largest first: an LSD radix sort of their IEEE bits, which
 * order as the values do for non-negative doubles, 16 bits a pass over the words of a little-endian Float64Array
 * (5 ms for 50,257 here, where the engine's sort of a Float64Array takes 12).
 */
function sortDescending(values: Float64Array): void {
  const n = values.length;
  // Below a few thousand the passes' 65,536 counters cost more than the engine's sort.
  if (n < 4096) {
    for (let i = 0; i < n; i++) values[i] = -values[i]!;
    values.sort();
    for (let i = 0; i < n; i++) values[i] = -values[i]!;
    return;
  }
  let from: Float64Array = values;
  let to: Float64Array = new Float64Array(n);
  const count = new Uint32Array(65_536);
  for (const [word, shift] of [
    [0, 0],
    [0, 16],
    [1, 0],
    [1, 16],
  ] as const) {
    const bits = new Uint32Array(from.buffer, from.byteOffset, 2 * n);
    const dest = new Uint32Array(to.buffer, to.byteOffset, 2 * n);
    count.fill(0);
    // Inverted digits: ascending on them is descending on the values.
    for (let i = 0; i < n; i++) count[(~bits[2 * i + word]! >>> shift) & 0xffff]!++;
    let at = 0;
    for (let d = 0; d < 65_536; d++) {
      const c = count[d]!;
      count[d] = at;
      at += c;
    }
    for (let i = 0; i < n; i++) {
      const j = count[(~bits[2 * i + word]! >>> shift) & 0xffff]!++;
      dest[2 * j] = bits[2 * i]!;
      dest[2 * j + 1] = bits[2 * i + 1]!;
    }
    [from, to] = [to, from];
  }
  // Four passes: the sorted values end in `values`, where they began.
}

/** The id at position `at` of the order: among the ids of its probability, in id order, the one of its rank. */
function tokenAt(x: Float64Array, ids: readonly number[] | null, order: Float64Array, at: number): number {
  const value = order[at]!;
  const same = (a: number) => a === value || (Number.isNaN(a) && Number.isNaN(value));
  let rank = 0;
  while (at - rank > 0 && same(order[at - rank - 1]!)) rank++;
  const n = ids === null ? x.length : ids.length;
  for (let i = 0; i < n; i++) {
    const id = ids === null ? i : ids[i]!;
    if (same(x[id]!) && rank-- === 0) return id;
  }
  throw new Error(`sampler: no token has the probability at position ${at} of the order`);
}

function argmax(x: Float64Array): number {
  let best = 0;
  for (let v = 1; v < x.length; v++) if (x[v]! > x[best]!) best = v;
  return best;
}
