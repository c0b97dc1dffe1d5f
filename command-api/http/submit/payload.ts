// A submission's body → what is recorded: the payload the agent runs (protocol/request-payload.ts), the request
// options the control plane enforces, and the comparison that makes a resubmission idempotent.
import {
  REQUEST_PAYLOAD_FORMAT,
  type InvokePayload,
  type RequestPayload,
  type TracePayload,
} from '../../../protocol/request-payload.js';
import type { SubmitBody } from './schema.js';
import { checkGenerationOptions, invokeGeneration, requestedNewTokens } from '../../../protocol/generation.js';

export interface Submission {
  payload: RequestPayload;
  options: { timeoutMs: number | null; queueTimeoutMs: number | null; steps: number };
  trusted: boolean;
  priority: boolean;
}

type TraceBody = {
  invokes: NonNullable<SubmitBody['invokes']>;
  block?: string;
  newTokens?: number;
  generation?: Record<string, unknown>;
  repeat?: { times: number; batch?: number };
};

/** One trace's invokes and options as the payload holds them; bad generation options throw their coded 400. */
function traceOf(body: TraceBody, where: string): TracePayload & { newTokens: number } {
  const generation = checkGenerationOptions(body.generation, `${where}generation`, 'request');
  const newTokens = requestedNewTokens(body.newTokens, generation);
  const invokes: InvokePayload[] = body.invokes.map((i, k) => {
    const inv: InvokePayload = typeof i.input === 'string' ? { prompt: i.input } : { tokens: i.input };
    if (i.block !== undefined) inv.block = i.block;
    if (i.generation !== undefined) {
      const own = checkGenerationOptions(i.generation, `${where}invoke ${k} generation`, 'invoke');
      invokeGeneration(generation, own, k, newTokens);
      inv.generation = own;
    }
    return inv;
  });
  const t: TracePayload & { newTokens: number } = { invokes, newTokens };
  if (body.block !== undefined) t.block = body.block;
  if (Object.keys(generation).length > 0) t.generation = generation;
  if (body.repeat !== undefined)
    t.repeat = body.repeat.batch === undefined ? { times: body.repeat.times } : { ...body.repeat };
  return t;
}

/** The submission recorded for a body; bad generation options throw their coded 400 (nothing is recorded). */
export function submissionOf(body: SubmitBody, tags: { trusted: boolean; priority: boolean }): Submission {
  let payload: RequestPayload;
  let steps: number;
  if (body.traces !== undefined) {
    const traces = body.traces.map((t, i) => traceOf(t, `trace ${i} `));
    payload = {
      format: REQUEST_PAYLOAD_FORMAT,
      invokes: [],
      traces,
      timeoutMs: body.timeoutMs ?? null,
      blocking: body.blocking ?? true,
    };
    steps = Math.max(...traces.map((t) => t.newTokens)) + 1;
  } else {
    const { invokes, newTokens, block, generation } = traceOf(body as TraceBody, '');
    payload = {
      format: REQUEST_PAYLOAD_FORMAT,
      invokes,
      newTokens,
      timeoutMs: body.timeoutMs ?? null,
      blocking: body.blocking ?? true,
    };
    if (block !== undefined) payload.block = block;
    if (generation !== undefined) payload.generation = generation;
    steps = newTokens + 1;
  }
  return {
    payload,
    options: { timeoutMs: body.timeoutMs ?? null, queueTimeoutMs: body.queueTimeoutMs ?? null, steps },
    trusted: tags.trusted && body.untrusted !== true,
    priority: tags.priority,
  };
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Which parts of a new submission differ from the one recorded under the same id (empty: the same submission).
 * `recorded` is the RequestReceived event's data.
 */
export function differences(
  recorded: { payload?: unknown; options?: Record<string, unknown>; trusted?: unknown; priority?: unknown },
  s: Submission,
): string[] {
  const out: string[] = [];
  const p = (recorded.payload ?? {}) as Record<string, unknown>;
  for (const k of ['invokes', 'traces', 'block', 'newTokens', 'generation', 'timeoutMs', 'blocking', 'edit'] as const) {
    if (!same(p[k], (s.payload as unknown as Record<string, unknown>)[k])) out.push(k);
  }
  if (p.format !== s.payload.format) out.push('format');
  const o = recorded.options ?? {};
  if (o.queueTimeoutMs !== s.options.queueTimeoutMs) out.push('queueTimeoutMs');
  if (o.timeoutMs !== s.options.timeoutMs && !out.includes('timeoutMs')) out.push('timeoutMs');
  if (recorded.trusted !== s.trusted) out.push('untrusted');
  if (recorded.priority !== s.priority) out.push('priority');
  return out;
}
