// What each invoke of a trace returns (RunResult.invokes): its block's result, its prompt and generated tokens, how its
// generation finished and the seed its sampler used.
import type { StartRequest } from '../../../protocol/interleave.js';
import { isSampling } from '../../../protocol/generation.js';
import type { GenerationPlan } from './host-context.js';
import type { Mediator } from './mediator.js';
import type { InvokeResult } from './request-types.js';

export function invokeResults(
  mediators: Mediator[],
  start: StartRequest,
  plan: GenerationPlan | null,
  generates: boolean,
): InvokeResult[] {
  return mediators.map((inv) => {
    const row = plan?.rows[inv.index];
    const sampled = row !== undefined && generates && isSampling(row.options);
    return {
      result: inv.result ?? { tree: null, tensors: [] },
      tokens: start.invokes[inv.index]!.tokens,
      generated: inv.generated,
      ...(inv.finish ? { finish: inv.finish } : {}),
      ...(sampled ? { seed: row.seed } : {}),
    };
  });
}
