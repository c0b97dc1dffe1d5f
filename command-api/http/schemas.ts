// Path parameters and small bodies of the command routes.
import { z } from 'zod';
import { EDIT_NAME, EDIT_SOURCE_MAX } from '../../domain/events/model.js';
import { ENTITY_ID, MODEL_KEY } from '../../domain/shared/ids.js';

export const modelKey = z
  .string()
  .regex(MODEL_KEY, 'a model key: 1–128 of letters, digits and . _ / -, starting with a letter or digit');
export const entityId = z
  .string()
  .regex(ENTITY_ID, 'an id: 1–128 of letters, digits and . _ : -, starting with a letter or digit');
export const replicaId = z
  .string()
  .max(140)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._/-]*#[1-9][0-9]*$/, 'a replica id <modelKey>#<n>');

export const idParams = z.strictObject({ id: entityId });
/** `POST /requests?waitMs=N`: hold the answer up to N ms for the request's final status (submit/final-wait.ts). */
export const submitQuery = (maxWaitMs: number) =>
  z.strictObject({ waitMs: z.coerce.number().int().min(0).max(maxWaitMs).optional() });
/** A route without a body takes none, or an empty object. */
export const noBody = z.strictObject({}).optional();

export const deploySchema = z.strictObject({
  model: modelKey,
  replicas: z.number().int().optional(),
  gpus: z.number().int().optional(),
  sizeBytes: z.number().int().optional(),
  paddingFactor: z.number().optional(),
  biasBytes: z.number().int().optional(),
  dtype: z.string().max(32).optional(),
  gradients: z.boolean().optional(),
  timeoutMs: z.number().int().nullable().optional(),
  concurrency: z.number().int().optional(),
  minDeploymentMs: z.number().int().optional(),
  pinned: z.boolean().optional(),
  force: z.boolean().optional(),
  autoscale: z
    .strictObject({
      enabled: z.boolean().optional(),
      thresholdMs: z.number().int().optional(),
      maxReplicas: z.number().int().optional(),
      backoffMs: z.number().int().optional(),
    })
    .optional(),
});

export const scaleSchema = z.strictObject({ model: modelKey, replicas: z.number().int() });
export const evictSchema = z.strictObject({
  model: modelKey.optional(),
  replica: replicaId.optional(),
  all: z.literal(true).optional(),
});
export const pinSchema = z.strictObject({ model: modelKey, pinned: z.boolean() });
const limit = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
export const createKeySchema = z.strictObject({
  label: z.string().min(1).max(200),
  trusted: z.boolean().optional(),
  priority: z.boolean().optional(),
  operator: z.boolean().optional(),
  /** The key's own limits (each one left out: the fabric's default). */
  limits: z
    .strictObject({
      maxTimeoutMs: limit.max(86_400_000).optional(),
      maxQueued: limit.optional(),
      maxRunning: limit.optional(),
      storageQuotaBytes: limit.optional(),
    })
    .optional(),
});
export const registerModelSchema = z.strictObject({
  model: modelKey,
  dir: z.string().min(1).max(4096),
  replace: z.boolean().optional(),
});
export const removeModelSchema = z.strictObject({ model: modelKey });
const editName = z
  .string()
  .regex(EDIT_NAME, 'an edit name: 1–64 of lowercase letters, digits and . _ -, starting with a letter or digit');
export const registerEditSchema = z.strictObject({
  model: modelKey,
  name: editName,
  source: z.string().min(1).max(EDIT_SOURCE_MAX),
  /** private (default): only this key may submit to the variant; public: every key (operators only). */
  visibility: z.enum(['public', 'private']).optional(),
});
export const removeEditSchema = z.strictObject({ model: modelKey, name: editName });
export const disableModelSchema = z.strictObject({ model: modelKey, reason: z.string().trim().min(1).max(500) });
export const enableModelSchema = z.strictObject({ model: modelKey });
export const keyIdParams = z.strictObject({ id: z.string().max(200) });
