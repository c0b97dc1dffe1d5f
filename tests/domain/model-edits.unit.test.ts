// Persistent edits in given/when/then form: any key registers a private edit of a registered model (its variant is
// `<model>@<name>`), only an operator a public one; a name is one edit (the same source again changes nothing, another
// is a conflict); only its author or an operator removes it, and a key that may not see a private edit gets
// CP_EDIT_NOT_FOUND, as for one that does not exist. Replacing the model's files keeps its edits; removing it drops them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ModelCommand } from '../../domain/model/commands.js';
import { modelDecider } from '../../domain/model/decide.js';
import type { ModelState } from '../../domain/model/state.js';
import type { ModelEvent, ModelFacts } from '../../domain/events/index.js';
import { at, T0 } from './fixtures.js';
import { fold, given } from './gwt.js';

const g = (h: ModelEvent[] = []) => given<ModelCommand, ModelState, ModelEvent>(modelDecider, h);
const FP = 'a'.repeat(64);
const SRC_FP = 'e'.repeat(64);
const SRC = 'async (m) => { m.transformer.h[0].output = (await m.transformer.h[0].output).mul(0); }';
const facts: ModelFacts = {
  fingerprint: FP,
  dir: '/models/gpt2',
  files: [{ name: 'model.onnx', bytes: 1000, sha256: 'c'.repeat(64) }],
  family: 'gpt2',
  architecture: 'GPT2LMHeadModel',
  inputs: ['input_ids'],
  outputs: ['logits'],
  moduleCount: 20,
  dtype: 'float32',
  weightsBytes: 600_000,
  padding: 'left',
  generative: true,
  vocabSize: 512,
  maxPositions: 64,
};
const registered: ModelEvent = {
  type: 'ModelRegistered',
  data: { ...facts, modelKey: 'gpt2', previousFingerprint: null, registeredBy: 'op', registeredAt: T0 },
};
const add = (
  o: Partial<{
    name: string;
    actor: string;
    operator: boolean;
    visibility: 'public' | 'private';
    fp: string;
    source: string;
  }> = {},
): ModelCommand => ({
  type: 'RegisterModelEdit',
  modelKey: 'gpt2',
  name: o.name ?? 'ablate-h0',
  source: o.source ?? SRC,
  fingerprint: o.fp ?? SRC_FP,
  visibility: o.visibility ?? 'private',
  actor: o.actor ?? 'alice',
  operator: o.operator ?? false,
  at: at(1),
});
const remove = (actor: string, operator = false): ModelCommand => ({
  type: 'RemoveModelEdit',
  modelKey: 'gpt2',
  name: 'ablate-h0',
  actor,
  operator,
  at: at(2),
});
const editOf = (author: string, visibility: 'public' | 'private' = 'private'): ModelEvent => ({
  type: 'ModelEditRegistered',
  data: {
    modelKey: 'gpt2',
    name: 'ablate-h0',
    variant: 'gpt2@ablate-h0',
    fingerprint: SRC_FP,
    source: SRC,
    visibility,
    author,
    registeredAt: at(1),
  },
});

describe('model edits', () => {
  it('any key registers a private edit; its variant is <model>@<name>', () => {
    g([registered])
      .when(add())
      .then([editOf('alice')]);
  });
  it('only an operator registers a public edit (every key would run it)', () => {
    g([registered])
      .when(add({ visibility: 'public' }))
      .thenRefused('CP_EDIT_FORBIDDEN', /only an operator/);
    g([registered])
      .when(add({ visibility: 'public', actor: 'op', operator: true }))
      .then([editOf('op', 'public')]);
  });
  it('the same edit again changes nothing; another source, author or visibility under the name is a conflict', () => {
    g([registered, editOf('alice')])
      .when(add())
      .then([]);
    g([registered, editOf('alice')])
      .when(add({ fp: 'f'.repeat(64), source: 'async (m) => 1' }))
      .thenRefused('CP_EDIT_CONFLICT', /registered already/);
    g([registered, editOf('alice')])
      .when(add({ actor: 'bob' }))
      .thenRefused('CP_EDIT_CONFLICT', /another key/);
  });
  it('is refused for a model not registered, a bad name, an empty or oversized source', () => {
    g().when(add()).thenRefused('CP_MODEL_NOT_FOUND');
    g([registered])
      .when(add({ name: 'Ablate H0' }))
      .thenRefused('CP_INVALID_COMMAND', /edit name/);
    g([registered])
      .when(add({ source: '  ' }))
      .thenRefused('CP_INVALID_COMMAND', /source/);
    g([registered])
      .when(add({ source: 'x'.repeat(64 * 1024 + 1) }))
      .thenRefused('CP_INVALID_COMMAND', /source/);
  });
  it('one key has at most 32 edits on a model at a time', () => {
    const many: ModelEvent[] = Array.from({ length: 32 }, (_, i) => {
      const e = editOf('alice') as Extract<ModelEvent, { type: 'ModelEditRegistered' }>;
      return { ...e, data: { ...e.data, name: `e${i}`, variant: `gpt2@e${i}` } };
    });
    g([registered, ...many])
      .when(add({ name: 'one-more' }))
      .thenRefused('CP_EDIT_LIMIT', /32 edits/);
    g([registered, ...many])
      .when(add({ name: 'one-more', actor: 'bob' }))
      .thenMatch(([e]) => assert.equal(e?.type, 'ModelEditRegistered'));
  });
  it('its author or an operator removes it; another key cannot, and cannot even see a private one', () => {
    const removed = (by: string): ModelEvent => ({
      type: 'ModelEditRemoved',
      data: {
        modelKey: 'gpt2',
        name: 'ablate-h0',
        variant: 'gpt2@ablate-h0',
        fingerprint: SRC_FP,
        removedBy: by,
        removedAt: at(2),
      },
    });
    g([registered, editOf('alice')])
      .when(remove('alice'))
      .then([removed('alice')]);
    g([registered, editOf('alice')])
      .when(remove('op', true))
      .then([removed('op')]);
    g([registered, editOf('alice')])
      .when(remove('bob'))
      .thenRefused('CP_EDIT_NOT_FOUND');
    g([registered, editOf('op', 'public')])
      .when(remove('bob'))
      .thenRefused('CP_EDIT_FORBIDDEN');
    g([registered, editOf('alice'), removed('alice')])
      .when(remove('alice'))
      .thenRefused('CP_EDIT_NOT_FOUND');
  });
  it('a removed name can be registered again; removing the model drops its edits, replacing its files keeps them', () => {
    const removedEv: ModelEvent = {
      type: 'ModelEditRemoved',
      data: {
        modelKey: 'gpt2',
        name: 'ablate-h0',
        variant: 'gpt2@ablate-h0',
        fingerprint: SRC_FP,
        removedBy: 'alice',
        removedAt: at(2),
      },
    };
    g([registered, editOf('alice'), removedEv])
      .when(add({ actor: 'bob' }))
      .then([editOf('bob')]);
    const replaced: ModelEvent = {
      type: 'ModelRegistered',
      data: {
        ...facts,
        fingerprint: 'b'.repeat(64),
        modelKey: 'gpt2',
        previousFingerprint: FP,
        registeredBy: 'op',
        registeredAt: at(3),
      },
    };
    assert.deepEqual(Object.keys(fold(modelDecider, [registered, editOf('alice'), replaced]).edits), ['ablate-h0']);
    const gone: ModelEvent = {
      type: 'ModelRemoved',
      data: { modelKey: 'gpt2', fingerprint: FP, removedBy: 'op', removedAt: at(3) },
    };
    assert.deepEqual(fold(modelDecider, [registered, editOf('alice'), gone]).edits, {});
  });
});
