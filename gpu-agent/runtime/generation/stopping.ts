// When a row stops generating: its EOS token (config.json / generation_config.json, unless ignoreEos), a stop token
// id, a stop string the generated text now contains, or its maxNewTokens. The token that ends a row is kept, as in
// transformers.

import type { FinishReason, StreamedToken } from '../../../protocol/generation.js';

export type { FinishReason };

/** Why a row ended: the reason, the step whose token ended it, the stop string or token id that matched (eos: the EOS id). */
export type Finish = NonNullable<StreamedToken['finish']>;

export interface StopSettings {
  eos: readonly number[];
  stopTokenIds: readonly number[];
  stop: readonly string[];
  maxNewTokens: number;
}

export class RowStopper {
  private readonly stopIds: Map<number, FinishReason>;
  private readonly window: number;

  constructor(
    private readonly s: StopSettings,
    private readonly decode: ((ids: number[]) => string) | undefined,
  ) {
    this.stopIds = new Map();
    for (const t of s.eos) this.stopIds.set(t, 'eos');
    for (const t of s.stopTokenIds) if (!this.stopIds.has(t)) this.stopIds.set(t, 'stop-token');
    // A stop string can only newly appear in text that reaches the newest token; each token is at least one
    // character, bar partial UTF-8 bytes, so the last (longest stop + 4) tokens cover it.
    this.window = Math.max(0, ...s.stop.map((x) => x.length)) + 4;
  }

  /** Why the row ends after appending `generated[generated.length - 1]` at `step`, or undefined. */
  check(generated: readonly number[], step: number): Finish | undefined {
    const token = generated[generated.length - 1]!;
    const byId = this.stopIds.get(token);
    if (byId) return { reason: byId, step, match: token };
    if (this.s.stop.length > 0 && this.decode) {
      const text = this.decode(generated.slice(-this.window));
      const hit = this.s.stop.find((x) => text.includes(x));
      if (hit !== undefined) return { reason: 'stop-string', step, match: hit };
    }
    if (generated.length >= this.s.maxNewTokens) return { reason: 'length', step };
    return undefined;
  }
}

/** How a finish reads in a message (`invoke 0 finished at step 2 (its EOS token)`). */
export const FINISH_TEXT: Record<Finish['reason'], string> = {
  eos: 'its EOS token',
  'stop-token': 'a stop token',
  'stop-string': 'a stop string',
  length: 'its maxNewTokens',
};
