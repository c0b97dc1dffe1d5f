// The sampler's draw (gpu-agent/runtime/generation/sampler.ts) orders the candidates by a radix sort of their
// probabilities; its draws must be exactly those of sorting the token ids by probability with ties by id, as it did
// before. The reference below is that comparator sort (of the same candidates, `candidateIds`): for random logits
// (ties, underflow to 0, a tiny vocabulary and GPT-2's), temperatures, top-k and top-p, the same seed gives the same
// tokens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { candidateIds, RowSampler, type SamplerSettings } from '../../gpu-agent/runtime/generation/sampler.js';
import { Sfc32 } from '../../gpu-agent/runtime/generation/sfc32.js';

/** The draw as a comparator sort of the ids (the order the sampler's draws are defined by). */
function referenceDraw(logits: Float64Array, s: SamplerSettings, rng: Sfc32): number {
  const vocab = logits.length;
  const x = Float64Array.from(logits, (l) => l / s.temperature);
  const max = x.reduce((m, v) => Math.max(v, m), -Infinity);
  let total = 0;
  for (let v = 0; v < vocab; v++) {
    x[v] = Math.exp(x[v]! - max);
    total += x[v]!;
  }
  const k = Math.min(s.topK ?? vocab, vocab);
  const p = s.topP ?? 1;
  let c = (candidateIds(x, total, k, p) ?? Array.from({ length: vocab }, (_, v) => v)).sort(
    (a, b) => x[b]! - x[a]! || a - b,
  );
  c = c.slice(0, k);
  if (p < 1) {
    const inTopK = c.reduce((n, id) => n + x[id]!, 0);
    let kept = 0;
    let mass = 0;
    while (kept < c.length) {
      mass += x[c[kept]!]!;
      kept++;
      if (mass >= p * inTopK) break;
    }
    c = c.slice(0, kept);
  }
  let sum = 0;
  for (const id of c) sum += x[id]!;
  const u = rng.next53() * sum;
  let acc = 0;
  for (const id of c) {
    acc += x[id]!;
    if (u < acc) return id;
  }
  return c[c.length - 1]!;
}

function randomLogits(rng: Sfc32, vocab: number, kind: 'spread' | 'ties' | 'extreme'): Float64Array {
  const out = new Float64Array(vocab);
  for (let v = 0; v < vocab; v++) {
    const r = rng.next53();
    if (kind === 'ties') out[v] = Math.floor(r * 6);
    else if (kind === 'extreme') out[v] = r < 0.05 ? 40 : r < 0.1 ? -900 : (r - 0.5) * 30;
    else out[v] = Math.fround((r - 0.5) * 20);
  }
  return out;
}

const SETTINGS: Array<Omit<SamplerSettings, 'sampling' | 'repetitionPenalty'>> = [
  { temperature: 1, topK: undefined, topP: undefined },
  { temperature: 0.7, topK: 50, topP: undefined },
  { temperature: 1.3, topK: undefined, topP: 0.9 },
  { temperature: 0.9, topK: 40, topP: 0.95 },
  { temperature: 0.05, topK: undefined, topP: undefined },
  { temperature: 2, topK: 1, topP: undefined },
  { temperature: 1, topK: undefined, topP: 1e-9 },
];

test('the same seed draws the same tokens as the comparator sort, over ties, underflow, top-k and top-p', () => {
  const data = Sfc32.seeded(20_261_204);
  let draws = 0;
  for (const vocab of [2, 7, 257, 50_257]) {
    for (const kind of ['spread', 'ties', 'extreme'] as const) {
      const logits = randomLogits(data, vocab, kind);
      for (const [i, o] of SETTINGS.entries()) {
        const settings: SamplerSettings = { sampling: true, repetitionPenalty: 1, ...o };
        const seed = vocab * 31 + i;
        const sampler = new RowSampler(settings, seed, []);
        const reference = Sfc32.seeded(seed);
        const steps = vocab > 1000 ? 1 : 25;
        for (let step = 0; step < steps; step++) {
          const want = referenceDraw(logits, settings, reference);
          const got = sampler.choose(logits, 0, vocab);
          assert.equal(got, want, `vocab ${vocab} ${kind} settings ${i} step ${step}`);
          draws++;
        }
      }
    }
  }
  assert.equal(draws, 3 * 7 * (3 * 25 + 1));
});

test('NaN logits still draw a token of the vocabulary, the same for the same seed', () => {
  const logits = Float64Array.from({ length: 300 }, (_, v) => (v % 7 === 0 ? Number.NaN : v / 50));
  const settings: SamplerSettings = { sampling: true, repetitionPenalty: 1, temperature: 1, topK: 20, topP: 0.9 };
  const a = Array.from(
    { length: 10 },
    (() => {
      const s = new RowSampler(settings, 5, []);
      return () => s.choose(logits, 0, 300);
    })(),
  );
  const b = Array.from(
    { length: 10 },
    (() => {
      const s = new RowSampler(settings, 5, []);
      return () => s.choose(logits, 0, 300);
    })(),
  );
  assert.deepEqual(a, b);
  for (const t of a) assert.ok(Number.isInteger(t) && t >= 0 && t < 300, String(t));
});
