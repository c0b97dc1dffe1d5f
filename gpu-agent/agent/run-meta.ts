// What a request's result metadata says of one run (a trace): its steps, tokens, finish reasons, seeds, cache and
// timings, and the batch of requests it ran in. The agent writes it into every result; the SDK's local mode writes the same.
import type { RunResult } from '../runtime/index.js';

export function runMeta(r: RunResult): Record<string, unknown> {
  return {
    ...(r.iterations === undefined ? {} : { iterations: r.iterations }),
    steps: r.steps,
    stoppedEarly: r.stoppedEarly,
    tokens: r.invokes.map((i) => i.tokens),
    generated: r.invokes.map((i) => i.generated),
    finish: r.invokes.map((i) => i.finish ?? null),
    seeds: r.invokes.map((i) => i.seed ?? null),
    cache: r.cache,
    timings: r.timings,
    ...(r.batch ? { batch: r.batch } : {}),
  };
}
