// State of one model key, folded from its stream.
import type { ModelEvent } from '../events/index.js';
import type { ModelEdit, ModelFacts } from '../events/model.js';

export interface ModelState {
  status: 'NONE' | 'REGISTERED' | 'REMOVED';
  facts: ModelFacts | null;
  /** Set while an operator has the model offline (kept across a replacement of its files). */
  disabled: { reason: string; by: string; at: string } | null;
  /** Persistent edits registered and not removed, by name. */
  edits: Record<string, ModelEdit>;
}

export function initialModelState(): ModelState {
  return { status: 'NONE', facts: null, disabled: null, edits: {} };
}

export function evolveModel(s: ModelState, e: ModelEvent): ModelState {
  switch (e.type) {
    case 'ModelRegistered': {
      const { modelKey: _k, previousFingerprint: _p, registeredBy: _b, registeredAt: _a, ...facts } = e.data;
      return {
        status: 'REGISTERED',
        facts,
        disabled: s.status === 'REGISTERED' ? s.disabled : null,
        edits: s.status === 'REGISTERED' ? s.edits : {},
      };
    }
    case 'ModelRemoved':
      return { status: 'REMOVED', facts: s.facts, disabled: null, edits: {} };
    case 'ModelEditRegistered': {
      const { modelKey: _k, ...edit } = e.data;
      return { ...s, edits: { ...s.edits, [e.data.name]: edit } };
    }
    case 'ModelEditRemoved': {
      const { [e.data.name]: _gone, ...edits } = s.edits;
      return { ...s, edits };
    }
    case 'ModelDisabled':
      return { ...s, disabled: { reason: e.data.reason, by: e.data.disabledBy, at: e.data.disabledAt } };
    case 'ModelEnabled':
      return { ...s, disabled: null };
  }
}
