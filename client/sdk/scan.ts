// `ndif.scan(model, input)` (nnsight's `model.scan()`): the shape and dtype of every module's outputs and inputs for
// an input, without running the model. The manifest's symbolic dims (protocol/manifest.ts) are resolved for the
// invoke's rows and the trace's padded sequence length, with the prompt tokenized here by the model's own tokenizer.
import { resolveShape } from '../../protocol/manifest.js';
import type { Manifest, ManifestTensor } from '../../protocol/manifest.js';
import { isInvokeList, RequestShapeError } from './request-body.js';
import type { Invoke } from './request-body.js';

/** One tensor a block would see: its graph name, element type and shape (-1 where the size is not known ahead). */
export interface ScannedTensor {
  name: string;
  dtype: string;
  shape: number[];
}

/** What a block of one invoke sees at every module of the model for this input. */
export interface ScanResult {
  model: string;
  /**
   * Rows a block sees of a batched tensor (its own invoke's; a tensor whose dim 0 is not the batch comes whole), and
   * the trace's sequence length (the longest prompt: rows are padded).
   */
  batch: number;
  sequence: number;
  /** Every module path ('' is the model) with its outputs and inputs, in forward order. */
  modules: Map<string, { outputs: ScannedTensor[]; inputs: ScannedTensor[] }>;
  /** Every parameter (`lm_head.weight`, …): its dtype and shape in PyTorch's layout, whatever the input. */
  parameters: Map<string, { dtype: string; shape: number[] }>;
  /** The shape of `<path>.output` (its first output) or `<path>.input`, as `(await m.<path>.output).shape` gives it. */
  shape(path: string, point?: 'output' | 'input'): number[];
}

export class ScanError extends RequestShapeError {}

/** Token counts of the invokes of `input` (text through `encode`, token lists as they are). */
export function invokeLengths(input: Invoke | Invoke[], encode: (text: string) => number[]): number[] {
  const list = isInvokeList(input) ? input : [input];
  if (list.length === 0) throw new ScanError('give at least one prompt (a string) or token list (number[]) to scan');
  return list.map((inv, i) => {
    const x = typeof inv === 'object' && !Array.isArray(inv) && inv !== null ? inv.input : inv;
    if (typeof x === 'string') return encode(x).length;
    if (Array.isArray(x)) return x.length;
    throw new ScanError(`invoke ${i}: expected a prompt (string), token ids (number[]) or { input }`);
  });
}

/** The shapes of every module for invokes of `lengths` tokens (pure: the manifest and the token counts). */
export function scanManifest(manifest: Manifest, lengths: number[]): ScanResult {
  const sequence = Math.max(...lengths);
  if (!(sequence > 0)) throw new ScanError('every invoke needs at least one token');
  if (sequence > manifest.maxPositions)
    throw new ScanError(`${sequence} tokens is more than ${manifest.model} takes (${manifest.maxPositions} positions)`);
  const batch = 1;
  // A batched tensor (dim 0 the batch) is handed to each invoke as its own rows; any other (e.g. [batch·sequence,
  // …] inside a head) whole, with every invoke's rows.
  const rows = lengths.length;
  const scanned = (t: ManifestTensor): ScannedTensor => ({
    name: t.name,
    dtype: t.dtype,
    shape: resolveShape(t, t.batched ? batch : rows, sequence),
  });
  const modules = new Map<string, { outputs: ScannedTensor[]; inputs: ScannedTensor[] }>();
  for (const mod of manifest.modules)
    modules.set(mod.path, { outputs: mod.outputs.map(scanned), inputs: mod.inputs.map(scanned) });
  const parameters = new Map<string, { dtype: string; shape: number[] }>();
  for (const mod of manifest.modules)
    for (const p of mod.parameters ?? [])
      parameters.set(mod.path === '' ? p.name : `${mod.path}.${p.name}`, {
        dtype: String(p.dtype),
        shape: [...p.shape],
      });
  return {
    model: manifest.model,
    batch,
    sequence,
    modules,
    parameters,
    shape(path, point = 'output') {
      const mod = modules.get(path);
      if (mod === undefined)
        throw new ScanError(`${manifest.model} has no module ${JSON.stringify(path)} (ndif types lists them)`);
      const t = point === 'output' ? mod.outputs[0] : mod.inputs[0];
      if (t === undefined) throw new ScanError(`${path || 'the model'} has no ${point}`);
      return t.shape;
    },
  };
}
