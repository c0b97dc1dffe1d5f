// How a served model carries its KV cache from one generation step to the next:
//   past     the export's own optimum-style inputs and outputs: past_key_values.<i>.key/value ← present.<i>.key/value
//            (sequence on axis 2), with an attention_mask spanning past and new positions;
//   carried  the runtime's rewrite of an export without them (kv-carry.ts): ndif.past.<i>.* ← ndif.present.<i>.*,
//            the mask fed for the new positions only and the past's padding in ndif.past_bias;
//   none     no cache: every step runs the whole sequence (the reason says why).
import type { ModelGraph } from '../graph/model-graph.js';
import type { InputPlan } from '../graph/model-inputs.js';
import type { CarriedKv } from './kv-carry.js';

export type KvMode = 'past' | 'carried' | 'none';

export interface KvSlot {
  /** Graph input fed with the cache of earlier steps … */
  past: string;
  /** … and the graph output holding it with this step's positions appended. */
  present: string;
  /** Axis of the sequence (negative: from the end). */
  axis: number;
}

export interface KvLayout {
  mode: KvMode;
  slots: KvSlot[];
  /** The attention_mask input covers past and new positions (past), or only the positions fed (carried). */
  maskSpansPast: boolean;
  /** Why there is no cache (mode none). */
  reason?: string;
}

export const NO_CACHE = (reason: string): KvLayout => ({ mode: 'none', slots: [], maskSpansPast: true, reason });

/** The export's own past_key_values ↔ present pairs, or why they cannot serve as a cache; null without past inputs. */
export function exportedPast(g: ModelGraph, plan: InputPlan): KvLayout | null {
  const past = plan.past.filter((p) => p.name.startsWith('past_key_values.'));
  if (past.length === 0) return null;
  const outputs = new Set(g.graphOutputs.map((v) => v.name));
  const slots: KvSlot[] = [];
  for (const p of past) {
    const present = p.name.replace(/^past_key_values\./, 'present.');
    if (!outputs.has(present))
      return NO_CACHE(`the export takes ${p.name} but has no ${present} output to carry it to the next step`);
    slots.push({ past: p.name, present, axis: 2 });
  }
  if (!plan.names.includes('attention_mask'))
    return NO_CACHE('the export takes past_key_values but no attention_mask, so a cached step cannot mask padding');
  return { mode: 'past', slots, maskSpansPast: true };
}

export function carriedLayout(c: CarriedKv): KvLayout {
  return {
    mode: 'carried',
    slots: c.layers.flatMap((l) => [
      { past: l.key.past, present: l.key.present, axis: l.key.axis },
      { past: l.value.past, present: l.value.present, axis: l.value.axis },
    ]),
    maskSpansPast: false,
  };
}
