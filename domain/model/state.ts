// State of one model key, folded from its stream.
import type { ModelEvent } from '../events/index.js';
import type { ModelFacts } from '../events/model.js';

export interface ModelState {
  status: 'NONE' | 'REGISTERED' | 'REMOVED';
  facts: ModelFacts | null;
  /** Set while an operator has the model offline (kept across a replacement of its files). */
  disabled: { reason: string; by: string; at: string } | null;
}

export function initialModelState(): ModelState {
  return { status: 'NONE', facts: null, disabled: null };
}

export function evolveModel(s: ModelState, e: ModelEvent): ModelState {
  switch (e.type) {
    case 'ModelRegistered': {
      const { modelKey: _k, previousFingerprint: _p, registeredBy: _b, registeredAt: _a, ...facts } = e.data;
      return { status: 'REGISTERED', facts, disabled: s.status === 'REGISTERED' ? s.disabled : null };
    }
    case 'ModelRemoved':
      return { status: 'REMOVED', facts: s.facts, disabled: null };
    case 'ModelDisabled':
      return { ...s, disabled: { reason: e.data.reason, by: e.data.disabledBy, at: e.data.disabledAt } };
    case 'ModelEnabled':
      return { ...s, disabled: null };
  }
}
