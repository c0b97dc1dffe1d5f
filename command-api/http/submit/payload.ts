// A submission's body → what is recorded: the payload the agent runs (protocol/request-payload.ts), the request
// options the control plane enforces, and the comparison that makes a resubmission idempotent.
import { REQUEST_PAYLOAD_FORMAT, type InvokePayload, type RequestPayload } from '../../../protocol/request-payload.js';
import type { SubmitBody } from './schema.js';
import { checkGenerationOptions, invokeGeneration, requestedNewTokens } from '../../../protocol/generation.js';

export interface Submission {
  payload: RequestPayload;
  options: { timeoutMs: number | null; queueTimeoutMs: number | null; steps: number };
  trusted: boolean;
  priority: boolean;
}

/** The submission recorded for a body; bad generation options throw their coded 400 (nothing is recorded). */
export function submissionOf(body: SubmitBody, tags: { trusted: boolean; priority: boolean }): Submission {
  const generation = checkGenerationOptions(body.generation, 'generation', 'request');
  const newTokens = requestedNewTokens(body.newTokens, generation);
  const invokes: InvokePayload[] = body.invokes.map((i, k) => {
    const inv: InvokePayload = typeof i.input === 'string' ? { prompt: i.input } : { tokens: i.input };
    if (i.block !== undefined) inv.block = i.block;
    if (i.generation !== undefined) {
      const own = checkGenerationOptions(i.generation, `invoke ${k} generation`, 'invoke');
      invokeGeneration(generation, own, k, newTokens);
      inv.generation = own;
    }
    return inv;
  });
  const payload: RequestPayload = { format: REQUEST_PAYLOAD_FORMAT, invokes, newTokens, timeoutMs: body.timeoutMs ?? null, blocking: body.blocking ?? true };
  if (body.block !== undefined) payload.block = body.block;
  if (Object.keys(generation).length > 0) payload.generation = generation;
  return {
    payload,
    options: { timeoutMs: body.timeoutMs ?? null, queueTimeoutMs: body.queueTimeoutMs ?? null, steps: newTokens + 1 },
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
export function differences(recorded: { payload?: unknown; options?: Record<string, unknown>; trusted?: unknown; priority?: unknown }, s: Submission): string[] {
  const out: string[] = [];
  const p = (recorded.payload ?? {}) as Record<string, unknown>;
  for (const k of ['invokes', 'block', 'newTokens', 'generation', 'timeoutMs', 'blocking'] as const) {
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
