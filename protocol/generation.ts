// Generation options (docs/runtime.md, "Generation"): how many tokens, how each is chosen, when a row stops, and
// whether the KV cache is used. The same checks run where a request is submitted (the command API answers 400
// with the code) and on the agent before anything runs (a payload is not trusted): a bad option changes nothing.
// Options are given for the whole request and may be overridden per invoke (all but `cache`).
import { FabricError } from './errors.js';

export interface GenerationOptions {
  /** Tokens to generate (steps 0 … n−1; each step appends one token per row). Per invoke: at most the request's. */
  maxNewTokens?: number;
  /** 0 or absent: greedy. Above 0: sample from softmax(logits / temperature). */
  temperature?: number;
  /** Sample among the k most likely tokens only. */
  topK?: number;
  /** Sample among the most likely tokens whose probabilities add up to p (nucleus), 0 < p ≤ 1. */
  topP?: number;
  /** Seeds the sampler: the same seed and request give the same tokens. Absent: derived from the request id (so a retry samples alike; a request without an id draws one), and reported. */
  seed?: number;
  /** Above 1 discourages tokens already in the row (prompt and generated), as transformers does; 1 is none. */
  repetitionPenalty?: number;
  /** Text that ends a row once the generated text contains it (the token that completes it is kept). */
  stop?: string[];
  /** Token ids that end a row besides the model's EOS (the token is kept). */
  stopTokenIds?: number[];
  /** Do not stop at the model's EOS token(s). */
  ignoreEos?: boolean;
  /** Request only: false re-runs the whole sequence each step instead of carrying the KV cache (default true). */
  cache?: boolean;
}

/** Why a row stopped generating (the token that ended it is kept). */
export type FinishReason = 'eos' | 'stop-token' | 'stop-string' | 'length';

/** One token a row got at one step, as the agent streams it (RequestTokensGenerated, the STREAM message). */
export interface StreamedToken {
  step: number;
  invoke: number;
  token: number;
  /** The token decoded after the ones before it (absent when the model has no tokenizer). */
  text?: string;
  /** Set on the token that ended the invoke's row: why, at which step, and the stop string or id that matched. */
  finish?: { reason: FinishReason; step: number; match?: string | number };
}

export const GENERATION_LIMITS = {
  maxNewTokens: 4095,
  stops: 16,
  stopChars: 256,
  stopTokenIds: 64,
  seed: Number.MAX_SAFE_INTEGER,
} as const;

export const GenerationErrorCode = {
  tooLong: 'GENERATION_TOO_LONG',
  badTopP: 'GENERATION_BAD_TOP_P',
  badTemperature: 'GENERATION_BAD_TEMPERATURE',
  emptyStop: 'GENERATION_EMPTY_STOP',
  badOption: 'GENERATION_BAD_OPTION',
} as const;

/** Every generation option, by name (the SDK copies exactly these from a call's options into the request). */
export const GENERATION_OPTION_KEYS = [
  'maxNewTokens',
  'temperature',
  'topK',
  'topP',
  'seed',
  'repetitionPenalty',
  'stop',
  'stopTokenIds',
  'ignoreEos',
  'cache',
] as const;

function fail(code: string, where: string, message: string, option: string, hint?: string): never {
  throw new FabricError(code, 400, `${where}: ${message}`, { details: { option, where }, ...(hint ? { hint } : {}) });
}

const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * Checks one set of options (`where` names it in messages: "generation", "invoke 2 generation") and returns a
 * normalised copy (`stop` as a list). Throws a coded FabricError (400) on the first bad option.
 */
export function checkGenerationOptions(input: unknown, where: string, level: 'request' | 'invoke'): GenerationOptions {
  if (input === undefined || input === null) return {};
  if (typeof input !== 'object' || Array.isArray(input))
    fail(GenerationErrorCode.badOption, where, 'must be an object of generation options', 'generation');
  const o = input as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!(GENERATION_OPTION_KEYS as readonly string[]).includes(k))
      fail(
        GenerationErrorCode.badOption,
        where,
        `unknown option ${JSON.stringify(k)}; options are ${GENERATION_OPTION_KEYS.join(', ')}`,
        k,
      );
  }
  const out: GenerationOptions = {};
  if (o.maxNewTokens !== undefined) {
    const v = o.maxNewTokens;
    if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > GENERATION_LIMITS.maxNewTokens) {
      fail(
        GenerationErrorCode.badOption,
        where,
        `maxNewTokens must be an integer from 0 to ${GENERATION_LIMITS.maxNewTokens}, got ${String(v)}`,
        'maxNewTokens',
      );
    }
    out.maxNewTokens = v as number;
  }
  if (o.temperature !== undefined) {
    if (!isNum(o.temperature) || o.temperature < 0) {
      fail(
        GenerationErrorCode.badTemperature,
        where,
        `temperature must be a finite number >= 0 (0: greedy), got ${String(o.temperature)}`,
        'temperature',
        'use 0 (or leave it out) for greedy decoding, e.g. 0.7 to sample',
      );
    }
    out.temperature = o.temperature;
  }
  if (o.topK !== undefined) {
    if (!Number.isInteger(o.topK) || (o.topK as number) < 1)
      fail(GenerationErrorCode.badOption, where, `topK must be an integer >= 1, got ${String(o.topK)}`, 'topK');
    out.topK = o.topK as number;
  }
  if (o.topP !== undefined) {
    if (!isNum(o.topP) || o.topP <= 0 || o.topP > 1) {
      fail(
        GenerationErrorCode.badTopP,
        where,
        `topP must be in (0, 1], got ${String(o.topP)}`,
        'topP',
        'topP is the probability mass kept, e.g. 0.9; 1 keeps every token',
      );
    }
    out.topP = o.topP;
  }
  if (o.seed !== undefined) {
    if (!Number.isSafeInteger(o.seed) || (o.seed as number) < 0)
      fail(
        GenerationErrorCode.badOption,
        where,
        `seed must be a non-negative integer (at most 2^53 - 1), got ${String(o.seed)}`,
        'seed',
      );
    out.seed = o.seed as number;
  }
  if (o.repetitionPenalty !== undefined) {
    if (!isNum(o.repetitionPenalty) || o.repetitionPenalty <= 0) {
      fail(
        GenerationErrorCode.badOption,
        where,
        `repetitionPenalty must be a finite number > 0 (1: none), got ${String(o.repetitionPenalty)}`,
        'repetitionPenalty',
      );
    }
    out.repetitionPenalty = o.repetitionPenalty;
  }
  if (o.stop !== undefined) {
    const list = typeof o.stop === 'string' ? [o.stop] : o.stop;
    if (!Array.isArray(list) || list.some((s) => typeof s !== 'string'))
      fail(GenerationErrorCode.badOption, where, 'stop must be a string or a list of strings', 'stop');
    if (list.length > GENERATION_LIMITS.stops)
      fail(
        GenerationErrorCode.badOption,
        where,
        `at most ${GENERATION_LIMITS.stops} stop strings, got ${list.length}`,
        'stop',
      );
    list.forEach((s: string, i: number) => {
      if (s.length === 0)
        fail(
          GenerationErrorCode.emptyStop,
          where,
          `stop string ${i} is empty: an empty string would end every row before its first token`,
          'stop',
          'remove it, or give the text that should end generation, e.g. "\\n"',
        );
      if (s.length > GENERATION_LIMITS.stopChars)
        fail(
          GenerationErrorCode.badOption,
          where,
          `stop string ${i} has ${s.length} characters; at most ${GENERATION_LIMITS.stopChars}`,
          'stop',
        );
    });
    out.stop = [...list];
  }
  if (o.stopTokenIds !== undefined) {
    const ids = o.stopTokenIds;
    if (!Array.isArray(ids) || ids.some((t) => !Number.isInteger(t) || t < 0))
      fail(
        GenerationErrorCode.badOption,
        where,
        'stopTokenIds must be a list of non-negative integer token ids',
        'stopTokenIds',
      );
    if (ids.length > GENERATION_LIMITS.stopTokenIds)
      fail(
        GenerationErrorCode.badOption,
        where,
        `at most ${GENERATION_LIMITS.stopTokenIds} stop token ids`,
        'stopTokenIds',
      );
    out.stopTokenIds = [...(ids as number[])];
  }
  if (o.ignoreEos !== undefined) {
    if (typeof o.ignoreEos !== 'boolean')
      fail(GenerationErrorCode.badOption, where, 'ignoreEos must be true or false', 'ignoreEos');
    out.ignoreEos = o.ignoreEos;
  }
  if (o.cache !== undefined) {
    if (level === 'invoke')
      fail(
        GenerationErrorCode.badOption,
        where,
        'cache is an option of the whole request (every row runs with or without the KV cache), not of one invoke',
        'cache',
      );
    if (typeof o.cache !== 'boolean')
      fail(GenerationErrorCode.badOption, where, 'cache must be true or false', 'cache');
    out.cache = o.cache;
  }
  return out;
}

/** The options of one invoke: its own over the request's; its maxNewTokens may not exceed the request's. */
export function invokeGeneration(
  request: GenerationOptions,
  own: GenerationOptions,
  invoke: number,
  requestMax: number,
): GenerationOptions {
  if (own.maxNewTokens !== undefined && own.maxNewTokens > requestMax) {
    fail(
      GenerationErrorCode.badOption,
      `invoke ${invoke} generation`,
      `maxNewTokens ${own.maxNewTokens} is more than the request's ${requestMax}: the request runs ${requestMax} steps`,
      'maxNewTokens',
      "raise the request-level maxNewTokens, or lower this invoke's",
    );
  }
  const merged: GenerationOptions = { ...request, ...own };
  delete merged.cache;
  return merged;
}

/** Whether tokens are sampled (else the highest logit wins): temperature > 0, or topK/topP given without a temperature. */
export function isSampling(o: GenerationOptions): boolean {
  if (o.temperature !== undefined) return o.temperature > 0;
  return o.topK !== undefined || o.topP !== undefined;
}

/** The request's number of generation steps from `newTokens` (the older name) and `maxNewTokens`; throws when they disagree. */
export function requestedNewTokens(newTokens: number | undefined, generation: GenerationOptions): number {
  const a = newTokens;
  const b = generation.maxNewTokens;
  if (a !== undefined && b !== undefined && a !== b) {
    fail(
      GenerationErrorCode.badOption,
      'generation',
      `newTokens ${a} and maxNewTokens ${b} disagree; give one of them (newTokens is the older name of maxNewTokens)`,
      'maxNewTokens',
    );
  }
  return b ?? a ?? 0;
}
