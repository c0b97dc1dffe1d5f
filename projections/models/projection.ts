// The registered models read model: each key's current registration (the files' fingerprint and what the runtime
// found in them), from ModelRegistered / ModelRemoved. The control plane's catalog (catalog/registered.ts) is a
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
}

export interface ModelsState {
  byKey: Map<string, RegisteredModel>;
}

export function initialModelsState(): ModelsState {
  return { byKey: new Map() };
}

export function applyModels(s: ModelsState, e: StoredEvent, d: DomainEvent | undefined = decode(e)): ModelsState {
  if (d === undefined) return s;
  if (d.type === 'ModelRegistered') s.byKey.set(d.data.modelKey, { ...d.data, position: e.position });
  else if (d.type === 'ModelRemoved') s.byKey.delete(d.data.modelKey);
  return s;
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
