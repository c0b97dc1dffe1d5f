// The names of a KV cache's tensors in a graph: the export's own (optimum's `past_key_values.<i>.key/value` in,
// `present.<i>.key/value` out) and the ones the runtime's rewrite carries (generation/kv-carry.ts:
// `ndif.past.<i>.*` in, `ndif.present.<i>.*` out, plus `ndif.past_bias`). A leaf module, so the graph analysis and
// the rewrite spell them once.

export type KvPart = 'key' | 'value';

/** The padding bias the carried cache adds to each attention's scores. */
export const CARRY_BIAS = 'ndif.past_bias';
export const carriedPast = (layer: number, kv: KvPart) => `ndif.past.${layer}.${kv}`;
export const carriedPresent = (layer: number, kv: KvPart) => `ndif.present.${layer}.${kv}`;

const EXPORT_PAST = /^past_key_values\.\d+\.(key|value)$/;
const ANY_PAST = /^(?:past_key_values|ndif\.past)\.\d+\.(key|value)$/;
const ANY_PRESENT = /^(?:ndif\.)?present\.\d+\.(key|value)$/;

/** An export's own cache input, `past_key_values.<i>.key/value`. */
export function isExportPast(tensor: string): boolean {
  return EXPORT_PAST.test(tensor);
}

/**
 * The KV cache a with-past export returns (optimum's `present.<i>.key/value`, or the runtime's carried
 * `ndif.present.<i>.key/value`): in PyTorch the attention writes it into the cache object, it does not return it,
 * so it is an output of no module, the model included.
 */
export function isCacheOutput(tensor: string): boolean {
  return ANY_PRESENT.test(tensor);
}

/** The cache fed back in (`past_key_values.<i>.*`, `ndif.past.<i>.*`, `ndif.past_bias`): an input of no module. */
export function isCacheInput(tensor: string): boolean {
  return ANY_PAST.test(tensor) || tensor === CARRY_BIAS;
}
