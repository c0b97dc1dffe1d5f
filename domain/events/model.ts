// Events of the model catalog aggregate, stream `model-<modelKey>`: which model files a key names. Registration
// records the files' sha256 fingerprint and what the runtime found in them, so every later decision, request and
// replay can say exactly which weights answered.
import { z } from 'zod';
import { bytes, count, id, isoTime, sha256 } from './common.js';

export const modelFile = z.object({ name: z.string().min(1).max(500), bytes, sha256 });
export type ModelFile = z.infer<typeof modelFile>;

/** What registration found in the model folder (runtime manifest and config.json). */
export const modelFacts = z.object({
  /** sha256 over the files' names and sha256s (catalog/fingerprint.ts). */
  fingerprint: sha256,
  /** The folder on the machine that registered it. */
  dir: z.string().min(1).max(4096),
  files: z.array(modelFile).min(1).max(64),
  /** config.json `model_type` (gpt2, llama, qwen2, bert, …), or `unknown`. */
  family: z.string().min(1).max(100),
  /** config.json `architectures[0]`, e.g. LlamaForCausalLM. */
  architecture: z.string().max(200).nullable(),
  inputs: z.array(z.string().max(200)).max(256),
  outputs: z.array(z.string().max(200)).max(256),
  moduleCount: count,
  /** Element type of most weight bytes (float32, float16, …). */
  dtype: z.string().min(1).max(40),
  weightsBytes: bytes,
  padding: z.enum(['left', 'right', 'none']),
  /** It has a language-model head (it can generate). */
  generative: z.boolean(),
  vocabSize: count,
  maxPositions: count,
  /**
   * The runtime's memory estimate for one batch row of `sequence` tokens (protocol/manifest.ts `memory`): forward
   * and backward activations at their peak, packed weight copies. Absent in registrations recorded before it.
   */
  memory: z
    .object({
      sequence: count,
      forwardActivationBytes: bytes,
      backwardActivationBytes: bytes,
      packedWeightsBytes: bytes,
    })
    .optional(),
});
export type ModelFacts = z.infer<typeof modelFacts>;

/** Why an operator took a model offline: shown to everyone whose submission is refused. */
export const modelDisabledReason = z.string().trim().min(1).max(500);

/** The name of a persistent edit under its model: the variant key is `<model>@<name>`. */
export const EDIT_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** Characters of an edit's source (a block: one async function expression). */
export const EDIT_SOURCE_MAX = 64 * 1024;
/** Edits one key may have registered on one model at a time (each holds its source in the model's state). */
export const EDITS_PER_KEY = 32;

/**
 * Who may submit to an edit's variant: `public` (an operator's: every key), `private` (the author key only). Either way
 * the edit runs where the requester's own block runs (in-process for a trusted key, in its sandbox otherwise).
 */
export const editVisibility = z.enum(['public', 'private']);

export const modelEventSchemas = {
  ModelRegistered: modelFacts.extend({
    modelKey: id,
    /** The files the key named before (a replacement), or null. */
    previousFingerprint: sha256.nullable(),
    registeredBy: id,
    registeredAt: isoTime,
  }),
  ModelRemoved: z.object({ modelKey: id, fingerprint: sha256, removedBy: id, removedAt: isoTime }),
  /** An operator took the model offline: submissions are refused with the reason, nothing deploys it. */
  ModelDisabled: z.object({ modelKey: id, reason: modelDisabledReason, disabledBy: id, disabledAt: isoTime }),
  ModelEnabled: z.object({ modelKey: id, enabledBy: id, enabledAt: isoTime }),
  /** A persistent edit (nnsight's model.edit()): interventions run before every block of the variant's requests. */
  ModelEditRegistered: z.object({
    modelKey: id,
    name: z.string().regex(EDIT_NAME),
    /** `<modelKey>@<name>`, what requests name. */
    variant: id,
    /** sha256 of the source, as the author sent it. */
    fingerprint: sha256,
    source: z.string().min(1).max(EDIT_SOURCE_MAX),
    visibility: editVisibility,
    author: id,
    registeredAt: isoTime,
  }),
  ModelEditRemoved: z.object({
    modelKey: id,
    name: z.string().regex(EDIT_NAME),
    variant: id,
    fingerprint: sha256,
    removedBy: id,
    removedAt: isoTime,
  }),
} as const;

/** A persistent edit as the model's state keeps it: what its registration recorded, less the model's key. */
export type ModelEdit = Omit<z.infer<typeof modelEventSchemas.ModelEditRegistered>, 'modelKey'>;
