// The registered models read model: each key's current registration (the files' fingerprint and what the runtime
// found in them), whether an operator has it offline and its persistent edits, from ModelRegistered / ModelRemoved /
// ModelDisabled / ModelEnabled / ModelEditRegistered / ModelEditRemoved. The control plane's catalog (catalog/registered.ts) is a
// view of it.
import type { ModelEdit, ModelFacts } from '../../domain/events/model.js';
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
  /** Persistent edits registered and not removed, by name (absent: none). */
  edits?: Record<string, RegisteredEdit>;
}

/** A persistent edit of a registered model: what a request of its variant runs with. */
export type RegisteredEdit = ModelEdit;

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
      // Replacing a disabled model's files keeps it disabled, and keeps its edits.
      const before = s.byKey.get(d.data.modelKey);
      s.byKey.set(d.data.modelKey, {
        ...d.data,
        position: e.position,
        ...(before?.disabled === undefined ? {} : { disabled: before.disabled }),
        ...(before?.edits === undefined ? {} : { edits: before.edits }),
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
    case 'ModelEditRegistered': {
      const m = s.byKey.get(d.data.modelKey);
      if (m === undefined) break;
      const { modelKey: _k, ...edit } = d.data;
      m.edits = { ...m.edits, [d.data.name]: edit };
      break;
    }
    case 'ModelEditRemoved': {
      const m = s.byKey.get(d.data.modelKey);
      if (m?.edits !== undefined) delete m.edits[d.data.name];
      break;
    }
  }
  return s;
}

/** Why the model is offline, or undefined when it is not disabled (or not registered). */
export function modelDisabled(s: ModelsState, modelKey: string): ModelDisabledNote | undefined {
  return s.byKey.get(modelKey)?.disabled;
}

/**
 * The edit a variant key (`<model>@<name>`) names, as `actor` may use it (a private edit is its author's only), or why
 * not: the model or the edit is unknown to that key.
 */
export function variantEdit(
  s: ModelsState,
  variant: string,
  actor: string,
): { model: RegisteredModel; edit: RegisteredEdit } | { model: RegisteredModel | undefined; edit: undefined } {
  const at = variant.indexOf('@');
  const model = s.byKey.get(variant.slice(0, at));
  const edit = model?.edits?.[variant.slice(at + 1)];
  if (edit === undefined || (edit.visibility === 'private' && edit.author !== actor)) return { model, edit: undefined };
  return { model: model!, edit };
}

/** The edits of a model `actor` may use: public ones and its own private ones, by name. */
export function visibleEdits(m: RegisteredModel, actor: string, operator: boolean): RegisteredEdit[] {
  return Object.values(m.edits ?? {})
    .filter((e) => e.visibility === 'public' || e.author === actor || operator)
    .sort((a, b) => a.name.localeCompare(b.name));
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
