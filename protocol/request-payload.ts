// What a submitted request asks the agent to run: the `payload` of SubmitRequest / RequestReceived (the shape
// docs/http-api.md gives). The control plane stores it without looking inside; the command API builds it from
// the HTTP body, and the GPU agent checks it again before running. `options.steps` of the request is
// `newTokens + 1`; the request's `options.timeoutMs` wins over the payload's copy.
import { z } from 'zod';
import { FabricError } from './errors.js';
import type { GenerationOptions } from './generation.js';

export const REQUEST_PAYLOAD_FORMAT = 'ndif-request/1';

export const PAYLOAD_LIMITS = {
  invokes: 64,
  /** Traces of a session (each up to `invokes` invokes). */
  traces: 64,
  /** Iterations of one repeated trace (`repeat.times`): the request's time limit and the tape limit bound it first. */
  repeat: 1_000_000,
  tokens: 100_000,
  /** Uploaded tensors one request names. */
  tensors: 64,
  newTokens: 4095,
  /** Characters of one prompt or block source (the HTTP body limit, 4 MiB, bounds them first). */
  textChars: 4 * 1024 * 1024,
} as const;

export interface InvokePayload {
  /** Text the model's tokenizer encodes … */
  prompt?: string;
  /** … or token ids (exactly one of the two). */
  tokens?: number[];
  /** This invoke's block: an async function expression `async (m, ctx) => { … }`. */
  block?: string;
  /** This invoke's generation options over the request's (protocol/generation.ts; checked by the agent). */
  generation?: GenerationOptions;
}

/** One trace of a session: its own invokes, shared block and generation, as a request of one trace has them. */
export interface TracePayload {
  invokes: InvokePayload[];
  block?: string;
  newTokens?: number;
  generation?: GenerationOptions;
  repeat?: RepeatPayload;
}

/**
 * A trace run `times` times in a row (a training loop), each iteration its own trace on the same channel. Without
 * `batch` every iteration runs all the trace's invokes; with `batch` the invokes are a data set taken `batch` at a
 * time, in order, wrapping around (iteration i runs invokes (i·batch + j) mod n, j < batch).
 */
export interface RepeatPayload {
  times: number;
  batch?: number;
}

export interface RequestPayload {
  format: typeof REQUEST_PAYLOAD_FORMAT;
  /** The invokes of a request of one trace; empty for a session (`traces`). */
  invokes: InvokePayload[];
  /** A session (nnsight's model.session()): several traces run one after the other in this one request. */
  traces?: TracePayload[];
  /** The block of every invoke that has none of its own. */
  block?: string;
  /** Tokens to generate (0: one forward pass); the older name of generation.maxNewTokens. */
  newTokens?: number;
  /** How tokens are generated (protocol/generation.ts; checked again by the agent before anything runs). */
  generation?: GenerationOptions;
  timeoutMs?: number | null;
  /** Recorded for the client's benefit: a non-blocking client polls GET /requests/:id. */
  blocking?: boolean;
  /**
   * The model variant's persistent edit (`gpt2@ablate-h0`), filled in by the command API from the registered edit when
   * the request names a variant: its interventions run with every block of every trace.
   */
  edit?: { key: string; source: string };
  /**
   * The key's uploaded tensors the request names (PUT /tensors/:name), resolved by the command API at submission: the
   * agent reads each blob (checked against its size and sha256) and the blocks read it as `ctx.tensors.<name>`.
   */
  tensors?: TensorRefPayload[];
}

export interface TensorRefPayload {
  name: string;
  dtype: 'float32' | 'int32' | 'int64';
  shape: number[];
  bytes: number;
  ref: string;
  sha256: string;
}

const text = z.string().max(PAYLOAD_LIMITS.textChars);
const invoke = z
  .strictObject({
    prompt: text.optional(),
    tokens: z.array(z.number().int().nonnegative()).min(1).max(PAYLOAD_LIMITS.tokens).optional(),
    block: text.optional(),
    generation: z.record(z.string(), z.unknown()).optional(),
  })
  .refine(
    (i) => (i.prompt === undefined) !== (i.tokens === undefined),
    'give a prompt or tokens, exactly one of the two',
  );

export const repeatSchema = z.strictObject({
  times: z.number().int().min(1).max(PAYLOAD_LIMITS.repeat),
  batch: z.number().int().min(1).max(PAYLOAD_LIMITS.invokes).optional(),
});

const trace = z
  .strictObject({
    invokes: z.array(invoke).min(1).max(PAYLOAD_LIMITS.invokes),
    block: text.optional(),
    newTokens: z.number().int().min(0).max(PAYLOAD_LIMITS.newTokens).optional(),
    generation: z.record(z.string(), z.unknown()).optional(),
    repeat: repeatSchema.optional(),
  })
  .refine((t) => (t.repeat?.batch ?? 0) <= t.invokes.length, {
    message: "repeat.batch is at most the trace's number of invokes",
    path: ['repeat', 'batch'],
  });

const payload = z
  .strictObject({
    format: z.literal(REQUEST_PAYLOAD_FORMAT),
    invokes: z.array(invoke).max(PAYLOAD_LIMITS.invokes),
    traces: z.array(trace).min(1).max(PAYLOAD_LIMITS.traces).optional(),
    block: text.optional(),
    newTokens: z.number().int().min(0).max(PAYLOAD_LIMITS.newTokens).optional(),
    generation: z.record(z.string(), z.unknown()).optional(),
    timeoutMs: z.number().int().positive().nullable().optional(),
    blocking: z.boolean().optional(),
    edit: z.strictObject({ key: z.string().min(1).max(300), source: text }).optional(),
    tensors: z
      .array(
        z.strictObject({
          name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/),
          dtype: z.enum(['float32', 'int32', 'int64']),
          shape: z.array(z.number().int().positive()).min(1).max(8),
          bytes: z.number().int().nonnegative(),
          ref: z.string().max(100),
          sha256: z.string().regex(/^[0-9a-f]{64}$/),
        }),
      )
      .max(PAYLOAD_LIMITS.tensors)
      .optional(),
  })
  .refine(
    (p) =>
      p.traces === undefined
        ? p.invokes.length > 0
        : p.invokes.length === 0 && p.block === undefined && p.newTokens === undefined && p.generation === undefined,
    {
      message:
        'give invokes (one trace) or traces (a session, each with its own invokes, block and generation), not both',
      path: ['invokes'],
    },
  );

export const RequestPayloadErrorCode = 'REQUEST_PAYLOAD_INVALID';

/** Returns the payload typed, or throws REQUEST_PAYLOAD_INVALID (400) naming the first bad field. */
export function parseRequestPayload(input: unknown): RequestPayload {
  const r = payload.safeParse(input);
  if (r.success) return r.data as RequestPayload;
  const issue = r.error.issues[0]!;
  const path = issue.path.join('.');
  throw new FabricError(
    RequestPayloadErrorCode,
    400,
    `request payload${path ? ` field ${path}` : ''}: ${issue.message}`,
    {
      hint: `send { format: "${REQUEST_PAYLOAD_FORMAT}", invokes: [{ prompt | tokens, block? }, …], block?, newTokens? } (at most ${PAYLOAD_LIMITS.invokes} invokes)`,
      details: {
        path,
        issues: r.error.issues.slice(0, 10).map((i) => ({ path: i.path.join('.'), message: i.message })),
      },
    },
  );
}
