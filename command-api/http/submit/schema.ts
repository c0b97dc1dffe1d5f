// The body of POST /requests (docs/http-api.md, "POST /requests — submit"). Unknown fields are refused.
import { z } from 'zod';

/** A model key, or a model variant `<model>@<edit name>` (a persistent edit's). */
const MODEL_OR_VARIANT = new RegExp(`${MODEL_KEY.source.slice(0, -1)}(?:@[a-z0-9][a-z0-9._-]{0,63})?$`);
import { ENTITY_ID, MODEL_KEY } from '../../../domain/shared/ids.js';
import { repeatSchema } from '../../../protocol/request-payload.js';

const blockSource = z.string().min(1, 'a block must not be empty').max(1_000_000);

export const invokeSchema = z.strictObject({
  input: z.union([
    z.string().min(1, 'a prompt must not be empty').max(1_000_000),
    z
      .array(
        z
          .number()
          .int('token ids are integers')
          .nonnegative('token ids are >= 0')
          .max(2 ** 31 - 1),
      )
      .min(1, 'a token list must not be empty')
      .max(100_000),
  ]),
  block: blockSource.optional(),
  /** This invoke's generation options (checked by protocol/generation.ts). */
  generation: z.record(z.string(), z.unknown()).optional(),
});

const invokes = z
  .array(invokeSchema)
  .min(1, 'send at least one invoke ({ "input": "<prompt>" })')
  .max(64, 'at most 64 invokes per trace');

/** One trace of a session: its invokes, the block of those without their own, its generation, how often it runs. */
export const traceSchema = z
  .strictObject({
    invokes,
    block: blockSource.optional(),
    newTokens: z.number().int().min(0).max(4095).optional(),
    generation: z.record(z.string(), z.unknown()).optional(),
    /** A loop: the trace runs `times` times (protocol/request-payload.ts, RepeatPayload). */
    repeat: repeatSchema.optional(),
  })
  .refine((t) => (t.repeat?.batch ?? 0) <= t.invokes.length, {
    message: "repeat.batch is at most the trace's number of invokes (the data set it takes batch at a time)",
    path: ['repeat', 'batch'],
  });

export const submitSchema = z
  .strictObject({
    requestId: z
      .string()
      .regex(ENTITY_ID, 'a request id: 1–128 of letters, digits and . _ : -, starting with a letter or digit')
      .optional(),
    model: z
      .string()
      .regex(
        MODEL_OR_VARIANT,
        'a model key (1–128 of letters, digits and . _ / -, starting with a letter or digit), or a variant <model>@<edit>',
      ),
    invokes: invokes.optional(),
    /** A session: traces run one after the other in this request (instead of `invokes`). */
    traces: z
      .array(traceSchema)
      .min(1, 'a session has at least one trace')
      .max(64, 'at most 64 traces per session')
      .optional(),
    block: blockSource.optional(),
    newTokens: z.number().int().min(0).max(4095).optional(),
    /** Generation options (protocol/generation.ts): maxNewTokens, temperature, topK, topP, seed, repetitionPenalty, stop, stopTokenIds, ignoreEos, cache. */
    generation: z.record(z.string(), z.unknown()).optional(),
    timeoutMs: z.number().int().positive().max(86_400_000).optional(),
    queueTimeoutMs: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400_000)
      .optional(),
    untrusted: z.boolean().optional(),
    /** Uploaded tensors (PUT /tensors/:name) the blocks read as ctx.tensors.<name>. */
    tensors: z
      .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'a tensor name: an identifier of at most 64 characters'))
      .max(64, 'at most 64 tensors per request')
      .refine((a) => new Set(a).size === a.length, 'each tensor is named once')
      .optional(),
    blocking: z.boolean().optional(),
  })
  .superRefine((b, ctx) => {
    if ((b.invokes === undefined) === (b.traces === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['invokes'],
        message:
          'send invokes (one trace: [{ "input": "<prompt>" }]) or traces (a session: [{ "invokes": [...] }, ...]), exactly one of the two',
      });
    } else if (
      b.traces !== undefined &&
      (b.block !== undefined || b.newTokens !== undefined || b.generation !== undefined)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['traces'],
        message: 'in a session, block, newTokens and generation belong to each trace',
      });
    }
  });

export type SubmitBody = z.infer<typeof submitSchema>;
