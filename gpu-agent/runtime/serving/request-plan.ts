// Request planning: a RunRequest checked and turned into the START the host sends (each invoke tokenized, one batch
// row per invoke) and, when it generates, the generation plan (rows, seeds, whether the KV cache is used). A pure
// function of the request and what it needs to know of the model (RequestModel): nothing is loaded or run, and a
// request refused here changed nothing.
import { randomUUID } from 'node:crypto';
import type { StartRequest } from '../../../protocol/interleave.js';
import { blockSourceMessage, checkBlockSource } from '../../../block-source/check.js';
import {
  GenerationErrorCode,
  checkGenerationOptions,
  invokeGeneration,
  requestedNewTokens,
} from '../../../protocol/generation.js';
import type { GenerationOptions } from '../../../protocol/generation.js';
import { FabricError } from '../../../protocol/errors.js';
import type { PaddingSide } from '../graph/model-inputs.js';
import type { KvMode } from '../generation/kv-layout.js';
import { resolveSeed, seedOfRequestId } from '../generation/generation.js';
import type { RowSpec } from '../generation/generation.js';
import { TokenizerLoadError, type TextTokenizer } from '../load/tokenizer.js';
import { usesGradients } from '../grad/uses-gradients.js';
import { InterventionError, RequestError, RequestErrorCode } from '../errors.js';
import type { GenerationPlan, TraceRun } from '../interleave/host-context.js';
import type { EditSpec, InvokeSpec, RunRequest, SessionRequest } from '../interleave/request-types.js';

/** What planning needs to know of the model. */
export interface RequestModel {
  key: string;
  vocabSize: number;
  maxPositions: number;
  inputNames: string[];
  outputNames: string[];
  /** The model has a language-model head (it can generate). */
  generative: boolean;
  padding: PaddingSide;
  /** How the KV cache is carried (none: every step runs the whole sequence). */
  kvMode: KvMode;
  tokenizer: TextTokenizer | null;
}

export interface PlannedRequest {
  start: StartRequest;
  generation: GenerationPlan | null;
}

/** Checks a request and plans it; throws RequestError (or InterventionError for a block's syntax) on bad input. */
export function planRequest(model: RequestModel, req: RunRequest): PlannedRequest {
  if (!Array.isArray(req.invokes) || req.invokes.length === 0)
    throw new RequestError(RequestErrorCode.noInvokes, 'a request needs at least one invoke (a prompt or token list)');
  if (req.newTokens !== undefined && (!Number.isInteger(req.newTokens) || req.newTokens < 0)) {
    throw new RequestError(
      RequestErrorCode.badNewTokens,
      `newTokens must be a non-negative integer, got ${String(req.newTokens)}`,
    );
  }
  const gen = asRequestError(() => checkGenerationOptions(req.generation, 'generation', 'request'));
  const newTokens = asRequestError(() => requestedNewTokens(req.newTokens, gen));
  const m = model;
  if (newTokens > 0 && !m.generative) {
    throw new RequestError(
      RequestErrorCode.notGenerative,
      `model ${m.key} has no language-model head (its outputs are ${m.outputNames.join(', ')}), so it cannot generate tokens; run a single forward pass (newTokens 0) and read its outputs`,
      { outputs: m.outputNames },
    );
  }
  const options: GenerationOptions[] = [];
  const ownSeeds: Array<number | undefined> = [];
  const invokes: StartRequest['invokes'] = req.invokes.map((inv, i) => {
    let tokens: number[];
    if (inv.prompt !== undefined && inv.tokens !== undefined)
      throw new RequestError(RequestErrorCode.badInput, `invoke ${i}: give a prompt or tokens, not both`);
    if (typeof inv.prompt === 'string') {
      if (!m.tokenizer)
        throw new RequestError(
          RequestErrorCode.noTokenizer,
          `invoke ${i}: model ${m.key} has no tokenizer.json; send token ids instead of text`,
        );
      tokens = encodePrompt(m, inv.prompt);
    } else if (Array.isArray(inv.tokens)) {
      tokens = inv.tokens;
      const bad = tokens.findIndex((t) => !Number.isInteger(t) || t < 0 || (m.vocabSize > 0 && t >= m.vocabSize));
      if (bad >= 0)
        throw new RequestError(
          RequestErrorCode.tokenOutOfRange,
          `invoke ${i}: token ${bad} is ${String(tokens[bad])}; token ids are integers in [0, ${m.vocabSize})`,
          { invoke: i, index: bad },
        );
    } else
      throw new RequestError(RequestErrorCode.badInput, `invoke ${i}: give a prompt (string) or tokens (array of ids)`);
    if (tokens.length === 0)
      throw new RequestError(RequestErrorCode.emptyPrompt, `invoke ${i}: the prompt has no tokens`);
    const given = asRequestError(() => checkGenerationOptions(inv.generation, `invoke ${i} generation`, 'invoke'));
    const own = asRequestError(() => invokeGeneration(gen, given, i, newTokens));
    options.push(own);
    ownSeeds.push(given.seed);
    checkGeneration(m, own, i);
    const rowNew = Math.min(own.maxNewTokens ?? newTokens, newTokens);
    if (tokens.length > m.maxPositions) {
      throw new RequestError(
        RequestErrorCode.promptTooLong,
        `invoke ${i}: ${tokens.length} prompt tokens need ${tokens.length} positions; model ${m.key} has ${m.maxPositions}. Shorten the prompt.`,
        { invoke: i, tokens: tokens.length, maxPositions: m.maxPositions },
      );
    }
    const needed = tokens.length + Math.max(0, rowNew - 1);
    if (needed > m.maxPositions) {
      throw new RequestError(
        GenerationErrorCode.tooLong,
        `invoke ${i}: ${tokens.length} prompt tokens + ${rowNew - 1} generated tokens fed back need ${needed} positions; model ${m.key} has ${m.maxPositions}. Generate at most ${m.maxPositions - tokens.length + 1} tokens (maxNewTokens) or shorten the prompt.`,
        { invoke: i, tokens: tokens.length, maxNewTokens: rowNew, maxPositions: m.maxPositions },
      );
    }
    if (inv.block !== undefined && typeof inv.block !== 'string')
      throw new RequestError(RequestErrorCode.badInput, `invoke ${i}: block must be source text`);
    // Exactly one function expression, checked before anything is compiled (in this process or a runner).
    const problem = inv.block === undefined || inv.block.trim() === '' ? undefined : checkBlockSource(inv.block);
    if (problem)
      throw new InterventionError(
        { phase: 'deserialize', type: 'BlockSyntaxError', message: blockSourceMessage(problem) },
        i,
      );
    return { invoke: i, source: inv.block ?? '', tokens, batchStart: i, batchSize: 1 };
  });
  const edit = req.edit === undefined ? undefined : checkedEdit(req.edit);
  if (edit) for (const inv of invokes) inv.edit = edit;
  const lengths = new Set(invokes.map((inv) => inv.tokens.length));
  if (m.padding === 'none' && lengths.size > 1) {
    throw new RequestError(
      RequestErrorCode.paddingUnsupported,
      `model ${m.key} cannot mask padding (its export has ${m.inputNames.includes('attention_mask') ? 'an attention_mask input that does not keep a padded row equal to the prompt alone' : 'no attention_mask input'}), so prompts of different lengths (${[...lengths].join(', ')} tokens) cannot share a batch; send prompts of one length, one prompt per request, or re-export the model with attention_mask and position_ids inputs`,
      { lengths: invokes.map((inv) => inv.tokens.length) },
    );
  }
  const steps = Math.max(1, newTokens);
  // A backward differentiates each step's own forward pass: a request that asks for gradients runs every step over
  // the whole sequence (no cache), so every step's graph is the model's own.
  const cached =
    newTokens > 1 && gen.cache !== false && m.kvMode !== 'none' && !invokes.some((inv) => usesGradients(inv.source));
  const start: StartRequest = {
    kind: 'START',
    requestId: req.requestId ?? randomUUID(),
    invokes,
    steps,
    cache: cached,
    ...(req.inputs === undefined || req.inputs.length === 0 ? {} : { inputs: req.inputs }),
  };
  if (newTokens === 0) return { start, generation: null };
  const requestSeed = gen.seed ?? (req.requestId !== undefined ? seedOfRequestId(req.requestId) : undefined);
  const rows: RowSpec[] = invokes.map((inv, i) => ({
    invoke: i,
    prompt: inv.tokens,
    options: options[i]!,
    seed: resolveSeed(ownSeeds[i], requestSeed, i),
  }));
  const tokenizer = m.tokenizer;
  return {
    start,
    generation: {
      maxNewTokens: newTokens,
      cached,
      rows,
      decode: tokenizer ? (ids) => tokenizer.decode(ids) : undefined,
    },
  };
}

/**
 * Plans every trace of a session before the first runs: a bad trace is refused with its own code, its message
 * starting `trace <t>:`.
 */
export function planSession(model: RequestModel, req: SessionRequest): TraceRun[] {
  if (!Array.isArray(req.traces) || req.traces.length === 0)
    throw new RequestError(RequestErrorCode.noTraces, 'a session needs at least one trace (invokes to run)');
  const requestId = req.requestId ?? randomUUID();
  const count = req.traces.length;
  return req.traces.map((t, i) => {
    const planOne = (invokes: InvokeSpec[], trace: NonNullable<StartRequest['trace']>) => {
      const run: RunRequest = {
        requestId,
        invokes,
        ...(req.edit === undefined ? {} : { edit: req.edit }),
        ...(req.inputs === undefined ? {} : { inputs: req.inputs }),
        ...(t.newTokens === undefined ? {} : { newTokens: t.newTokens }),
        ...(t.generation === undefined ? {} : { generation: t.generation }),
        ...(req.onToken ? { onToken: (e) => req.onToken!({ ...e, trace: i }) } : {}),
        ...(req.onLog ? { onLog: req.onLog } : {}),
      };
      let planned: PlannedRequest;
      try {
        planned = planRequest(model, run);
      } catch (e) {
        if (e instanceof RequestError)
          throw new RequestError(e.code, `trace ${i}: ${e.message}`, { ...e.details, trace: i }, e.httpStatus);
        if (e instanceof InterventionError) throw e.inTrace(i);
        throw e;
      }
      return { req: run, start: { ...planned.start, trace }, plan: planned.generation };
    };
    if (t.repeat === undefined) return planOne(t.invokes, { index: i, count });
    const times = t.repeat.times;
    if (!Number.isSafeInteger(times) || times < 1)
      throw new RequestError(RequestErrorCode.badRepeat, `trace ${i}: repeat.times must be a positive integer`, {
        trace: i,
      });
    const n = t.invokes.length;
    const batch = t.repeat.batch ?? n;
    if (!Number.isSafeInteger(batch) || batch < 1 || batch > n)
      throw new RequestError(
        RequestErrorCode.badRepeat,
        `trace ${i}: repeat.batch must be 1 to the trace's ${n} invokes, got ${String(batch)}`,
        { trace: i },
      );
    // Iteration w starts at invoke (w·batch) mod n: the windows repeat every n / gcd(n, batch) iterations.
    const period = Math.min(times, n / gcd(n, batch));
    const runs = Array.from({ length: period }, (_, w) =>
      planOne(
        Array.from({ length: batch }, (_, j) => t.invokes[(w * batch + j) % n]!),
        { index: i, count, iteration: 0, iterations: times },
      ),
    );
    return { ...runs[0]!, repeat: { times, runs } };
  });
}

/** The edit as START carries it; one that is not exactly one function expression is refused like a block. */
function checkedEdit(e: EditSpec): { key: string; source: string } {
  if (typeof e.key !== 'string' || typeof e.source !== 'string')
    throw new RequestError(RequestErrorCode.badInput, 'the edit must be { key, source } with source text');
  const problem = checkBlockSource(e.source);
  if (problem)
    throw new InterventionError({
      phase: 'deserialize',
      type: 'BlockSyntaxError',
      message: `edit ${e.key}: ${blockSourceMessage(problem)}`,
    });
  return { key: e.key, source: e.source };
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** Options that need the model: stop token ids in its vocabulary, stop strings need its tokenizer. */
function checkGeneration(m: RequestModel, o: GenerationOptions, invoke: number): void {
  const vocab = m.vocabSize;
  const bad = (o.stopTokenIds ?? []).find((t) => vocab > 0 && t >= vocab);
  if (bad !== undefined) {
    throw new RequestError(
      GenerationErrorCode.badOption,
      `invoke ${invoke}: stop token id ${bad} is not in model ${m.key}'s vocabulary (ids 0 to ${vocab - 1})`,
      { option: 'stopTokenIds', invoke },
    );
  }
  if ((o.stop ?? []).length > 0 && !m.tokenizer) {
    throw new RequestError(
      GenerationErrorCode.badOption,
      `invoke ${invoke}: stop strings need the model's tokenizer to read the generated text, and model ${m.key} has no tokenizer.json; give stopTokenIds instead`,
      { option: 'stop', invoke },
    );
  }
}

/** Runs `f`, turning its coded FabricError (a bad generation option) into the RequestError of a refused request. */
function asRequestError<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof FabricError && !(e instanceof RequestError))
      throw new RequestError(e.code, e.hint ? `${e.message} (${e.hint})` : e.message, e.details);
    throw e;
  }
}

/** The prompt's ids; a tokenizer.json the library refuses (a folder changed after registration) is the model's fault. */
function encodePrompt(m: RequestModel, prompt: string): number[] {
  try {
    return m.tokenizer!.encode(prompt);
  } catch (e) {
    if (!(e instanceof TokenizerLoadError)) throw e;
    throw new RequestError(
      RequestErrorCode.tokenizerInvalid,
      `model ${m.key}: ${e.message}; send token ids instead of text, and ask the operator to re-register the model`,
      { file: e.file },
      500,
    );
  }
}
