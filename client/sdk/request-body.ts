// Builds the body of `POST /requests` (docs/http-api.md) from what a caller passes to `trace`/`submit`.
import { blockSource } from './block-source.js';
import type { BlockFn } from './block-source.js';
import type { BlockOrigins } from './user-frames.js';
import { FabricClientError } from './errors.js';
import { GENERATION_OPTION_KEYS } from '../../protocol/generation.js';
import type { GenerationOptions } from '../../protocol/generation.js';

export type { GenerationOptions };

/** One invoke: a prompt (text), token ids, or either with its own block (and params) and generation options. */
export type Invoke =
  | string
  | number[]
  | {
      input: string | number[];
      block?: BlockFn | string;
      params?: unknown;
      generation?: Omit<GenerationOptions, 'cache'>;
    };

/** How tokens are generated (protocol/generation.ts, docs/sdk.md "Generation"), as trace options; `stop` may be one string. */
export type GenerationFields = Omit<GenerationOptions, 'stop'> & { stop?: string | string[] };

export interface RequestOptions extends GenerationFields {
  /** The older name of maxNewTokens. */
  newTokens?: number;
  /** Generation options as one object (the fields above win where both are given). */
  generation?: GenerationOptions;
  /** Execution limit on the fabric, from dispatch (default: the deployment's). */
  timeoutMs?: number;
  /** Longest wait in the fabric's queue. */
  queueTimeoutMs?: number;
  /** Run in the sandbox even with a trusted key. */
  untrusted?: boolean;
  /** This key's uploaded tensors (`ndif.tensors.upload`) the blocks read as `ctx.tensors.<name>`. */
  tensors?: string[];
  /** JSON values the block reads as the variable `params` (a block cannot see the caller's variables). */
  params?: unknown;
  /** The request id (default: a fresh uuid). Resubmitting the same id and body is idempotent. */
  requestId?: string;
}

type InvokeBody = { input: string | number[]; block?: string; generation?: GenerationOptions };

/** One trace of a session as the body holds it. */
export interface TraceBody {
  invokes: InvokeBody[];
  block?: string;
  newTokens?: number;
  generation?: GenerationOptions;
  repeat?: { times: number; batch?: number };
}

/**
 * One trace of a session (`ndif.session`): its input and block as `trace` takes them, and its own params and generation
 * options (a session's traces each have their own; the session's options hold the rest).
 */
export interface SessionTrace extends GenerationFields {
  input: Invoke | Invoke[];
  block?: BlockFn | string;
  params?: unknown;
  newTokens?: number;
  generation?: GenerationOptions;
  /**
   * A loop: run this trace `times` times in the session (its blocks see `ctx.iteration`, `ctx.shared` kept); with
   * `batch` its inputs are a data set taken `batch` at a time, wrapping around. Its value is its last iteration's.
   */
  repeat?: number | { times: number; batch?: number };
}

export interface SubmitBody {
  requestId: string;
  model: string;
  invokes?: InvokeBody[];
  traces?: TraceBody[];
  block?: string;
  newTokens?: number;
  generation?: GenerationOptions;
  timeoutMs?: number;
  queueTimeoutMs?: number;
  untrusted?: boolean;
  tensors?: string[];
  blocking: boolean;
}

export class RequestShapeError extends FabricClientError {}

/** True when `input` is a list of invokes rather than one prompt or one token list. */
export function isInvokeList(input: Invoke | Invoke[]): input is Invoke[] {
  if (!Array.isArray(input)) return false;
  return input.length === 0 || typeof input[0] !== 'number';
}

/** One trace's invokes, shared block and generation, from what `trace` takes. */
function traceBody(
  input: Invoke | Invoke[],
  block: BlockFn | string | undefined,
  opts: GenerationFields & { params?: unknown; newTokens?: number; generation?: GenerationOptions },
  where = '',
  origins?: { of: BlockOrigins; trace: number },
): TraceBody {
  const sent = (fn: BlockFn | string, params: unknown, invoke: number | null): string => {
    const src = blockSource(fn, params);
    origins?.of.record(origins.trace, invoke, fn, src);
    return src;
  };
  const list = isInvokeList(input) ? input : [input];
  if (list.length === 0)
    throw new RequestShapeError(
      `${where}give at least one prompt (a string), token list (number[]) or { input, block }`,
    );
  const invokes = list.map((inv, i) => {
    if (typeof inv === 'string') return { input: inv };
    if (Array.isArray(inv)) return { input: tokenList(inv, i, where) };
    if (inv && typeof inv === 'object' && 'input' in inv) {
      const input =
        typeof inv.input === 'string'
          ? inv.input
          : Array.isArray(inv.input)
            ? tokenList(inv.input, i, where)
            : bad(i, where);
      // An invoke's own params reach the shared block too: the invoke then gets the shared block with its params.
      const own = inv.block ?? (inv.params !== undefined ? block : undefined);
      if (own === undefined && inv.params !== undefined)
        throw new RequestShapeError(
          `${where}invoke ${i} has params but no block reads them: give the invoke a block, or pass a shared block`,
        );
      const out: InvokeBody = own !== undefined ? { input, block: sent(own, inv.params ?? opts.params, i) } : { input };
      if (inv.generation !== undefined) out.generation = normalised(inv.generation);
      return out;
    }
    return bad(i, where);
  });
  const body: TraceBody = { invokes };
  if (block !== undefined) body.block = sent(block, opts.params, null);
  if (opts.newTokens !== undefined) body.newTokens = opts.newTokens;
  const generation: GenerationOptions = { ...(opts.generation ?? {}) };
  for (const k of GENERATION_OPTION_KEYS)
    if (opts[k] !== undefined) (generation as Record<string, unknown>)[k] = opts[k];
  if (Object.keys(generation).length > 0) body.generation = normalised(generation);
  return body;
}

function repeatOf(r: NonNullable<SessionTrace['repeat']>, where: string): { times: number; batch?: number } {
  const o = typeof r === 'number' ? { times: r } : r;
  if (o === null || typeof o !== 'object' || !Number.isSafeInteger(o.times) || o.times < 1)
    throw new RequestShapeError(`${where}repeat is a positive integer, or { times, batch? }`);
  if (o.batch !== undefined && (!Number.isSafeInteger(o.batch) || o.batch < 1))
    throw new RequestShapeError(`${where}repeat.batch is a positive integer (at most the trace's inputs)`);
  return o.batch === undefined ? { times: o.times } : { times: o.times, batch: o.batch };
}

function checkModel(model: string): void {
  if (typeof model !== 'string' || model === '')
    throw new RequestShapeError('the model key must be a non-empty string, e.g. "gpt2-tiny"');
}

export function buildSubmitBody(
  model: string,
  input: Invoke | Invoke[],
  block: BlockFn | string | undefined,
  opts: RequestOptions,
  requestId: string,
  blocking: boolean,
  origins?: BlockOrigins,
): SubmitBody {
  checkModel(model);
  const traced = traceBody(input, block, opts, '', origins && { of: origins, trace: 0 });
  const body: SubmitBody = { requestId, model, ...traced, blocking };
  return withRequestOptions(body, opts);
}

/** The body of a session: its traces one after the other in one request (each its own input, block and generation). */
export function buildSessionBody(
  model: string,
  traces: SessionTrace[],
  opts: RequestOptions,
  requestId: string,
  blocking: boolean,
  origins?: BlockOrigins,
): SubmitBody {
  checkModel(model);
  if (!Array.isArray(traces) || traces.length === 0)
    throw new RequestShapeError('a session needs at least one trace: [{ input, block }, …]');
  const shared = GENERATION_OPTION_KEYS.filter((k) => opts[k] !== undefined).concat(
    opts.newTokens !== undefined ? ['newTokens' as never] : [],
    opts.generation !== undefined ? ['generation' as never] : [],
  );
  if (shared.length > 0)
    throw new RequestShapeError(
      `in a session, generation options belong to each trace (${shared.join(', ')} given for the whole session)`,
    );
  const body: SubmitBody = {
    requestId,
    model,
    traces: traces.map((t, i) => {
      if (t === null || typeof t !== 'object' || !('input' in t))
        throw new RequestShapeError(`trace ${i}: expected { input, block?, params?, maxNewTokens?, … }`);
      const body = traceBody(
        t.input,
        t.block,
        { ...t, params: t.params ?? opts.params },
        `trace ${i}: `,
        origins && { of: origins, trace: i },
      );
      if (t.repeat !== undefined) body.repeat = repeatOf(t.repeat, `trace ${i}: `);
      return body;
    }),
    blocking,
  };
  return withRequestOptions(body, opts);
}

function withRequestOptions(body: SubmitBody, opts: RequestOptions): SubmitBody {
  if (opts.timeoutMs !== undefined) body.timeoutMs = opts.timeoutMs;
  if (opts.queueTimeoutMs !== undefined) body.queueTimeoutMs = opts.queueTimeoutMs;
  if (opts.untrusted) body.untrusted = true;
  if (opts.tensors !== undefined && opts.tensors.length > 0) body.tensors = [...opts.tensors];
  return body;
}

/** `stop` as a list (a single string is one stop string). */
function normalised(g: GenerationOptions | GenerationFields): GenerationOptions {
  const out = { ...g } as GenerationOptions;
  if (typeof (g as GenerationFields).stop === 'string') out.stop = [(g as GenerationFields).stop as string];
  return out;
}

function tokenList(t: number[], i: number, where = ''): number[] {
  if (t.length === 0 || t.some((x) => !Number.isInteger(x) || x < 0))
    throw new RequestShapeError(`${where}invoke ${i}: token ids must be a non-empty list of non-negative integers`);
  return t;
}

function bad(i: number, where = ''): never {
  throw new RequestShapeError(
    `${where}invoke ${i}: expected a prompt (string), token ids (number[]) or { input, block? }`,
  );
}
