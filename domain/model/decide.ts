// The model catalog decider: a key names one set of files (by their sha256 fingerprint). Registering the same
// files again changes nothing; other files under a registered key are refused unless the operator replaces them
// (never while replicas are deployed: they run the old files); a model is removed only once nothing is deployed.
// An operator disables a registered model with a reason (taking it offline) and enables it again; disabling it
// again with the same reason, or enabling a model that is not disabled, changes nothing.
import type { ModelEvent } from '../events/index.js';
import type { Decider } from '../shared/decider.js';
import { DomainErrorCode as C, refuse } from '../shared/errors.js';
import type {
  DisableModel,
  EnableModel,
  ModelCommand,
  RegisterModel,
  RegisterModelEdit,
  RemoveModel,
  RemoveModelEdit,
} from './commands.js';
import { EDIT_NAME, EDIT_SOURCE_MAX, EDITS_PER_KEY } from '../events/model.js';
import { evolveModel, initialModelState, type ModelState } from './state.js';

const short = (fp: string) => fp.slice(0, 12);

function register(c: RegisterModel, s: ModelState): ModelEvent[] {
  const now = s.status === 'REGISTERED' ? s.facts! : null;
  if (now !== null && now.fingerprint === c.model.fingerprint && now.dir === c.model.dir) return [];
  if (now !== null && now.fingerprint !== c.model.fingerprint) {
    if (!c.replace) {
      refuse(
        C.modelConflict,
        `model ${c.modelKey} is registered with other files (sha256 ${short(now.fingerprint)}… in ${now.dir}); these are ${short(c.model.fingerprint)}… in ${c.model.dir}`,
        `register them under another key, or replace the registration (ndif models add --replace, "replace": true) once ${c.modelKey} is not deployed`,
        { registered: now.fingerprint, offered: c.model.fingerprint },
      );
    }
    if (c.deployedReplicas > 0) {
      refuse(
        C.modelDeployed,
        `model ${c.modelKey} has ${c.deployedReplicas} deployed replica${c.deployedReplicas === 1 ? '' : 's'} running its current files; they cannot be replaced under it`,
        `evict the deployment first (ndif evict ${c.modelKey}), then replace`,
        { deployedReplicas: c.deployedReplicas },
      );
    }
  }
  return [
    {
      type: 'ModelRegistered',
      data: {
        ...c.model,
        modelKey: c.modelKey,
        previousFingerprint: now?.fingerprint ?? null,
        registeredBy: c.actor,
        registeredAt: c.at,
      },
    },
  ];
}

function remove(c: RemoveModel, s: ModelState): ModelEvent[] {
  if (s.status !== 'REGISTERED')
    refuse(C.modelNotFound, `model ${c.modelKey} is not registered`, 'ndif models list shows the registered models');
  if (c.deployedReplicas > 0) {
    refuse(
      C.modelDeployed,
      `model ${c.modelKey} has ${c.deployedReplicas} deployed replica${c.deployedReplicas === 1 ? '' : 's'}; it cannot be removed while deployed`,
      `evict it first (ndif evict ${c.modelKey})`,
      { deployedReplicas: c.deployedReplicas },
    );
  }
  return [
    {
      type: 'ModelRemoved',
      data: { modelKey: c.modelKey, fingerprint: s.facts!.fingerprint, removedBy: c.actor, removedAt: c.at },
    },
  ];
}

const MAX_REASON = 500;

function requireRegistered(c: { modelKey: string }, s: ModelState): void {
  if (s.status !== 'REGISTERED')
    refuse(C.modelNotFound, `model ${c.modelKey} is not registered`, 'ndif models list shows the registered models');
}

function disable(c: DisableModel, s: ModelState): ModelEvent[] {
  const reason = typeof c.reason === 'string' ? c.reason.trim() : '';
  if (reason.length === 0 || reason.length > MAX_REASON)
    refuse(
      C.invalidCommand,
      `a model is disabled with a reason of 1 to ${MAX_REASON} characters (got ${reason.length})`,
      'say why, e.g. --reason "weights being replaced until 14:00"; researchers see it when refused',
    );
  requireRegistered(c, s);
  if (s.disabled?.reason === reason) return [];
  return [{ type: 'ModelDisabled', data: { modelKey: c.modelKey, reason, disabledBy: c.actor, disabledAt: c.at } }];
}

function enable(c: EnableModel, s: ModelState): ModelEvent[] {
  requireRegistered(c, s);
  if (s.disabled === null) return [];
  return [{ type: 'ModelEnabled', data: { modelKey: c.modelKey, enabledBy: c.actor, enabledAt: c.at } }];
}

// Persistent edits. An edit runs with every block of its variant's requests, where that block runs: in-process for a
// trusted key, in a sandbox otherwise; it never runs with more trust than the requester has. What an edit may change
// is every answer its variant gives, so who may author one for others is the question: a public edit (every key may
// submit to the variant) only by an operator; any key may register private edits (only the author may submit to the
// variant, so an edit is never code another key's requests run unasked). A name is the model's: one edit per name,
// whoever registered it; only its author or an operator removes it.
function registerEdit(c: RegisterModelEdit, s: ModelState): ModelEvent[] {
  if (typeof c.name !== 'string' || !EDIT_NAME.test(c.name))
    refuse(
      C.invalidCommand,
      `edit name ${JSON.stringify(c.name)}: 1 to 64 of lowercase letters, digits and . _ -, starting with a letter or digit`,
      'name what the edit does, e.g. ablate-h0 (the variant is <model>@<name>)',
    );
  if (typeof c.source !== 'string' || c.source.trim() === '' || c.source.length > EDIT_SOURCE_MAX)
    refuse(
      C.invalidCommand,
      `an edit's source is 1 to ${EDIT_SOURCE_MAX} characters (got ${typeof c.source === 'string' ? c.source.length : 'none'})`,
      'send the block whose interventions make the edit: async (m, ctx) => { … }',
    );
  if (c.visibility !== 'public' && c.visibility !== 'private')
    refuse(C.invalidCommand, 'visibility is public or private');
  requireRegistered(c, s);
  if (c.visibility === 'public' && !c.operator)
    refuse(
      C.editForbidden,
      `a public edit runs in every request of ${c.modelKey}@${c.name} that any key submits; only an operator registers one`,
      'register it private (only your key may use the variant), or ask an operator',
    );
  // A state folded before edits existed has none.
  const edits = s.edits ?? {};
  const now = edits[c.name];
  if (now !== undefined) {
    if (now.fingerprint === c.fingerprint && now.author === c.actor && now.visibility === c.visibility) return [];
    refuse(
      C.editConflict,
      `${c.modelKey}@${c.name} is registered already (sha256 ${short(now.fingerprint)}…, by ${now.author === c.actor ? 'you' : 'another key'})`,
      `choose another name, or remove it first (ndif edits rm ${c.modelKey}@${c.name}) if it is yours`,
      { fingerprint: now.fingerprint },
    );
  }
  const own = Object.values(edits).filter((e) => e.author === c.actor).length;
  if (own >= EDITS_PER_KEY)
    refuse(
      C.editLimit,
      `this key has ${own} edits of ${c.modelKey} registered, the most one key may have on a model (${EDITS_PER_KEY})`,
      'remove one you no longer use (ndif edits ls / ndif edits rm)',
      { edits: own, limit: EDITS_PER_KEY },
    );
  return [
    {
      type: 'ModelEditRegistered',
      data: {
        modelKey: c.modelKey,
        name: c.name,
        variant: `${c.modelKey}@${c.name}`,
        fingerprint: c.fingerprint,
        source: c.source,
        visibility: c.visibility,
        author: c.actor,
        registeredAt: c.at,
      },
    },
  ];
}

function removeEdit(c: RemoveModelEdit, s: ModelState): ModelEvent[] {
  const now = s.edits?.[c.name];
  if (now === undefined || (now.visibility === 'private' && now.author !== c.actor && !c.operator))
    refuse(
      C.editNotFound,
      `${c.modelKey}@${c.name} is not a registered edit`,
      `ndif edits ls ${c.modelKey} lists the edits you may use`,
    );
  if (now.author !== c.actor && !c.operator)
    refuse(
      C.editForbidden,
      `${c.modelKey}@${c.name} is another key's edit`,
      'only its author or an operator removes it',
    );
  return [
    {
      type: 'ModelEditRemoved',
      data: {
        modelKey: c.modelKey,
        name: c.name,
        variant: now.variant,
        fingerprint: now.fingerprint,
        removedBy: c.actor,
        removedAt: c.at,
      },
    },
  ];
}

export function decideModel(c: ModelCommand, s: ModelState): ModelEvent[] {
  switch (c.type) {
    case 'RegisterModelEdit':
      return registerEdit(c, s);
    case 'RemoveModelEdit':
      return removeEdit(c, s);
    case 'DisableModel':
      return disable(c, s);
    case 'EnableModel':
      return enable(c, s);
    case 'RegisterModel':
    case 'RemoveModel':
      if (!Number.isSafeInteger(c.deployedReplicas) || c.deployedReplicas < 0)
        refuse(C.invalidCommand, 'deployedReplicas must be an integer >= 0');
      return c.type === 'RegisterModel' ? register(c, s) : remove(c, s);
  }
}

export const modelDecider: Decider<ModelCommand, ModelState, ModelEvent> = {
  initialState: initialModelState,
  evolve: evolveModel,
  decide: decideModel,
};
