// The model catalog: which model keys the fabric serves (the allowlist), where each model's files are,
// the weights bytes placement needs, and each model's manifest. The control plane asks it before it
// accepts a request or a deployment; agents ask it where to load a model from.
import type { Manifest } from '../protocol/manifest.js';
import type { MemoryEstimate } from '../domain/placement/size.js';

export interface ModelEntry {
  /** The key users and operators name the model by, e.g. `gpt2-tiny`. */
  key: string;
  /** One line for people: architecture, size, where it came from. */
  description: string;
  /** Sum of the model's initializer bytes (what placement pads and biases into a size). */
  weightsBytes: number;
  /** Folder with model.onnx, config.json, tokenizer.json, on the machine that asks (agents). */
  dir: string;
  /** Settings an on-demand deployment of this model uses (gpus, padding, pinned…); operators may override. */
  defaults: {
    gpus: number;
    dtype: string;
    paddingFactor?: number;
    biasBytes?: number;
    /** Placement's size for what the replica serves by default (forward passes). */
    sizeBytes?: number;
    /** The same with room for a backward's activations (a deployment with `gradients: true`). */
    gradientSizeBytes?: number;
  };
  /** The runtime's memory estimate recorded at registration (domain/placement/size.ts). */
  memory?: MemoryEstimate;
  /** A registered model's files: their sha256 fingerprint and what registration found (absent for folders only configured). */
  registration?: {
    fingerprint: string;
    family: string;
    architecture: string | null;
    generative: boolean;
    registeredAt: string;
    registeredBy: string;
  };
  /** Set while an operator has the model offline: submissions are refused with the reason, nothing deploys it. */
  disabled?: { reason: string; by: string; at: string };
}

export interface ModelCatalog {
  /** Every model the fabric may serve, in a stable order. */
  list(): ModelEntry[];
  /** The entry for `key`, or undefined when the key is not in the allowlist. */
  get(key: string): ModelEntry | undefined;
  /**
   * The model's manifest (module tree, shapes for `sequence` tokens when given, vocab size).
   * Rejects with a FabricError when the key is unknown or the model cannot be read.
   */
  manifest(key: string, shape?: { batch: number; sequence: number }): Promise<Manifest>;
}
