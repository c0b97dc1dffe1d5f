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
    // Candidates sorted by probability (ties by id). Top-k bounds them first; top-p needs only the head of the
    // order, so the sort covers the tokens above a probability threshold lowered until they hold p of the mass.
    let total = 0;
    for (let v = 0; v < vocab; v++) {
      x[v] = Math.exp(x[v]! - max);
      total += x[v]!;
    }
    const k = Math.min(this.s.topK ?? vocab, vocab);
    const p = this.s.topP ?? 1;
    let candidates = this.head(x, total, k, p);
    candidates.sort((a, b) => x[b]! - x[a]! || a - b);
    if (candidates.length > k) candidates = candidates.slice(0, k);
    if (p < 1) {
      let kept = 0;
      let mass = 0;
      const inTopK = candidates.reduce((n, c) => n + x[c]!, 0);
      while (kept < candidates.length) {
        mass += x[candidates[kept]!]!;
        kept++;
        if (mass >= p * inTopK) break;
      }
      candidates = candidates.slice(0, kept);
    }
    let sum = 0;
    for (const c of candidates) sum += x[c]!;
    const u = this.rng!.next53() * sum;
    let acc = 0;
    for (const c of candidates) {
      acc += x[c]!;
      if (u < acc) return c;
    }
    return candidates[candidates.length - 1]!;
  }

  /** Token ids that can be in the top-k / top-p set (a superset, unsorted). */
  private head(w: Float64Array, total: number, k: number, p: number): number[] {
    const vocab = w.length;
    if (k >= vocab && p >= 1) return Array.from({ length: vocab }, (_, v) => v);
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
}

function argmax(x: Float64Array): number {
  let best = 0;
  for (let v = 1; v < x.length; v++) if (x[v]! > x[best]!) best = v;
  return best;
}
