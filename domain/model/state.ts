// State of one model key, folded from its stream.
import type { ModelEvent } from '../events/index.js';
import type { ModelFacts } from '../events/model.js';

export interface ModelState {
  status: 'NONE' | 'REGISTERED' | 'REMOVED';
  facts: ModelFacts | null;
}

export function initialModelState(): ModelState {
  return { status: 'NONE', facts: null };
}

export function evolveModel(s: ModelState, e: ModelEvent): ModelState {
  switch (e.type) {
    case 'ModelRegistered': {
      const { modelKey: _k, previousFingerprint: _p, registeredBy: _b, registeredAt: _a, ...facts } = e.data;
      return { status: 'REGISTERED', facts };
    }
    case 'ModelRemoved':
      return { status: 'REMOVED', facts: s.facts };
  }
}
