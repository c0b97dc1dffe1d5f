// The registered models read model: each key's current registration (the files' fingerprint and what the runtime
// found in them) and whether an operator has it offline, from ModelRegistered / ModelRemoved / ModelDisabled /
// ModelEnabled. The control plane's catalog (catalog/registered.ts) is a
// view of it.
import type { ModelFacts } from '../../domain/events/model.js';
import type { DomainEvent } from '../../domain/events/types.js';
import type { JsonValue, StoredEvent } from '../../eventstore/port.js';
import { decode } from '../decode.js';

export interface RegisteredModel extends ModelFacts {
  modelKey: string;
  registeredBy: string;
  registeredAt: string;
  previousFingerprint: string | null;
  /** Log position of the registration (the catalog lists models in this order). */
  position: number;
  /** Set while an operator has the model offline (absent in snapshots written before models could be disabled). */
  disabled?: ModelDisabledNote;
}

export interface ModelDisabledNote {
  reason: string;
  by: string;
  at: string;
}

export interface ModelsState {
  byKey: Map<string, RegisteredModel>;
}

export function initialModelsState(): ModelsState {
  return { byKey: new Map() };
}

export function applyModels(s: ModelsState, e: StoredEvent, d: DomainEvent | undefined = decode(e)): ModelsState {
  if (d === undefined) return s;
  switch (d.type) {
    case 'ModelRegistered': {
      // Replacing a disabled model's files keeps it disabled.
      const disabled = s.byKey.get(d.data.modelKey)?.disabled;
      s.byKey.set(d.data.modelKey, {
        ...d.data,
        position: e.position,
        ...(disabled === undefined ? {} : { disabled }),
      });
      break;
    }
    case 'ModelRemoved':
      s.byKey.delete(d.data.modelKey);
      break;
    case 'ModelDisabled': {
      const m = s.byKey.get(d.data.modelKey);
      if (m !== undefined) m.disabled = { reason: d.data.reason, by: d.data.disabledBy, at: d.data.disabledAt };
      break;
    }
    case 'ModelEnabled':
      delete s.byKey.get(d.data.modelKey)?.disabled;
      break;
  }
  return s;
}

/** Why the model is offline, or undefined when it is not disabled (or not registered). */
export function modelDisabled(s: ModelsState, modelKey: string): ModelDisabledNote | undefined {
  return s.byKey.get(modelKey)?.disabled;
}

/** Registered models in registration order. */
export function registeredModels(s: ModelsState): RegisteredModel[] {
  return [...s.byKey.values()].sort((a, b) => a.position - b.position);
}

export function modelsToSnapshot(s: ModelsState): JsonValue {
  return registeredModels(s) as unknown as JsonValue;
}

/** Snapshots written before models were events have none (nothing was registered then). */
export function modelsFromSnapshot(j: JsonValue | undefined): ModelsState {
  const s = initialModelsState();
  for (const m of (j ?? []) as unknown as RegisteredModel[]) s.byKey.set(m.modelKey, m);
  return s;
}
