// Commands of the model catalog aggregate, stream `model-<modelKey>`. Facts about other aggregates a rule needs
// (how many replicas of the model are deployed) are read by the caller from the projections and passed in.
import type { ModelFacts } from '../events/model.js';

/** An operator (`POST /models`, `ndif models add`, or NDIF_MODELS at start) registers a model folder under a key. */
export interface RegisterModel {
  type: 'RegisterModel';
  modelKey: string;
  actor: string;
  /** Allowed to name other files than the key names now (NDIF_MODELS at start; `--replace`). */
  replace: boolean;
  /** Replicas of the model not yet removed, from the cluster view. */
  deployedReplicas: number;
  model: ModelFacts;
  at: string;
}

export interface RemoveModel {
  type: 'RemoveModel';
  modelKey: string;
  actor: string;
  deployedReplicas: number;
  at: string;
}

/** An operator takes a model offline (`POST /models/:key/disable`, `ndif models disable`). */
export interface DisableModel {
  type: 'DisableModel';
  modelKey: string;
  actor: string;
  reason: string;
  at: string;
}

export interface EnableModel {
  type: 'EnableModel';
  modelKey: string;
  actor: string;
  at: string;
}

/** A key registers a persistent edit of a model (`POST /models/:key/edits`, `ndif edits add`). */
export interface RegisterModelEdit {
  type: 'RegisterModelEdit';
  modelKey: string;
  name: string;
  /** The edit's block source (checked to be one function expression by the caller). */
  source: string;
  /** sha256 of `source`, computed by the caller (the domain has no hashing). */
  fingerprint: string;
  visibility: 'public' | 'private';
  actor: string;
  /** The actor's key has the operator tag. */
  operator: boolean;
  at: string;
}

export interface RemoveModelEdit {
  type: 'RemoveModelEdit';
  modelKey: string;
  name: string;
  actor: string;
  operator: boolean;
  at: string;
}

export type ModelCommand =
  | RegisterModel
  | RemoveModel
  | DisableModel
  | EnableModel
  | RegisterModelEdit
  | RemoveModelEdit;
