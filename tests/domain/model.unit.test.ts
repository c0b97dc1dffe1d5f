// Model catalog rules in given/when/then form: a key names one set of files (sha256 fingerprint); the same files
// again change nothing, other files are refused unless replaced while nothing is deployed; removal refuses while
// deployed. An operator disables a registered model with a reason and enables it again.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ModelCommand } from '../../domain/model/commands.js';
import { modelDecider } from '../../domain/model/decide.js';
import type { ModelState } from '../../domain/model/state.js';
import type { ModelEvent, ModelFacts } from '../../domain/events/index.js';
import { at, T0 } from './fixtures.js';
import { fold, given } from './gwt.js';

const g = (h: ModelEvent[] = []) => given<ModelCommand, ModelState, ModelEvent>(modelDecider, h);
const FP1 = 'a'.repeat(64);
const FP2 = 'b'.repeat(64);
const facts = (fingerprint = FP1, dir = '/models/llama'): ModelFacts => ({
  fingerprint,
  dir,
  files: [{ name: 'model.onnx', bytes: 1000, sha256: 'c'.repeat(64) }],
  family: 'llama',
  architecture: 'LlamaForCausalLM',
  inputs: ['input_ids', 'attention_mask', 'position_ids'],
  outputs: ['logits'],
  moduleCount: 33,
  dtype: 'float32',
  weightsBytes: 600_000,
  padding: 'left',
  generative: true,
  vocabSize: 512,
  maxPositions: 64,
});
const register = (
  o: Partial<{ fingerprint: string; dir: string; replace: boolean; deployed: number; seconds: number }> = {},
): ModelCommand => ({
  type: 'RegisterModel',
  modelKey: 'llama',
  actor: 'op',
  replace: o.replace ?? false,
  deployedReplicas: o.deployed ?? 0,
  model: facts(o.fingerprint, o.dir),
  at: at(o.seconds ?? 0),
});
const registered: ModelEvent = {
  type: 'ModelRegistered',
  data: { ...facts(), modelKey: 'llama', previousFingerprint: null, registeredBy: 'op', registeredAt: T0 },
};

describe('model catalog', () => {
  it('registers a folder with its fingerprint and what the runtime found in it', () => {
    g().when(register()).then([registered]);
  });
  it('the same files again change nothing; the same files in another folder are a new registration', () => {
    g([registered])
      .when(register({ seconds: 5 }))
      .then([]);
    g([registered])
      .when(register({ dir: '/mnt/llama', seconds: 5 }))
      .thenMatch(([e]) => {
        assert.ok(e?.type === 'ModelRegistered');
        assert.deepEqual([e.data.dir, e.data.previousFingerprint], ['/mnt/llama', FP1]);
      });
  });
  it('other files under a registered key are refused, naming both fingerprints', () => {
    g([registered])
      .when(register({ fingerprint: FP2 }))
      .thenRefused(
        'CP_MODEL_CONFLICT',
        /registered with other files \(sha256 aaaaaaaaaaaa… in \/models\/llama\); these are bbbbbbbbbbbb…/,
      );
  });
  it('replace swaps the files while nothing is deployed, never while replicas run the old ones', () => {
    g([registered])
      .when(register({ fingerprint: FP2, replace: true, deployed: 1 }))
      .thenRefused('CP_MODEL_DEPLOYED', /1 deployed replica/);
    g([registered])
      .when(register({ fingerprint: FP2, replace: true }))
      .thenMatch(([e]) => {
        assert.ok(e?.type === 'ModelRegistered');
        assert.deepEqual([e.data.fingerprint, e.data.previousFingerprint], [FP2, FP1]);
      });
  });
  it('remove refuses while deployed and for unknown keys; afterwards the key can name other files', () => {
    const remove = (deployed: number): ModelCommand => ({
      type: 'RemoveModel',
      modelKey: 'llama',
      actor: 'op',
      deployedReplicas: deployed,
      at: at(9),
    });
    g().when(remove(0)).thenRefused('CP_MODEL_NOT_FOUND');
    g([registered])
      .when(remove(2))
      .thenRefused('CP_MODEL_DEPLOYED', /2 deployed replicas/);
    const removed: ModelEvent = {
      type: 'ModelRemoved',
      data: { modelKey: 'llama', fingerprint: FP1, removedBy: 'op', removedAt: at(9) },
    };
    g([registered]).when(remove(0)).then([removed]);
    g([registered, removed]).when(remove(0)).thenRefused('CP_MODEL_NOT_FOUND');
    g([registered, removed])
      .when(register({ fingerprint: FP2, seconds: 10 }))
      .thenMatch(([e]) => assert.equal(e?.type === 'ModelRegistered' && e.data.previousFingerprint, null));
    assert.equal(fold(modelDecider, [registered, removed]).status, 'REMOVED');
  });
  it('a negative replica count is an invalid command', () => {
    g([registered])
      .when(register({ deployed: -1 }))
      .thenRefused('CP_INVALID_COMMAND');
  });
});

describe('disabling a model', () => {
  const disable = (reason: string, seconds = 20): ModelCommand => ({
    type: 'DisableModel',
    modelKey: 'llama',
    actor: 'op',
    reason,
    at: at(seconds),
  });
  const enable = (seconds = 30): ModelCommand => ({
    type: 'EnableModel',
    modelKey: 'llama',
    actor: 'op',
    at: at(seconds),
  });
  const disabled: ModelEvent = {
    type: 'ModelDisabled',
    data: { modelKey: 'llama', reason: 'weights being replaced', disabledBy: 'op', disabledAt: at(20) },
  };
  const enabled: ModelEvent = { type: 'ModelEnabled', data: { modelKey: 'llama', enabledBy: 'op', enabledAt: at(30) } };

  it('given a registered model, when an operator disables it with a reason, then ModelDisabled records it', () => {
    g([registered]).when(disable('  weights being replaced ')).then([disabled]);
    assert.deepEqual(fold(modelDecider, [registered, disabled]).disabled, {
      reason: 'weights being replaced',
      by: 'op',
      at: at(20),
    });
  });
  it('the same reason again changes nothing; another reason is recorded', () => {
    g([registered, disabled]).when(disable('weights being replaced', 25)).then([]);
    g([registered, disabled])
      .when(disable('GPU maintenance', 25))
      .thenMatch(([e]) => assert.equal(e?.type === 'ModelDisabled' && e.data.reason, 'GPU maintenance'));
  });
  it('is refused without a reason, with a reason over 500 characters, or for a model not registered', () => {
    g([registered]).when(disable('   ')).thenRefused('CP_INVALID_COMMAND');
    g([registered])
      .when(disable('x'.repeat(501)))
      .thenRefused('CP_INVALID_COMMAND');
    g().when(disable('gone')).thenRefused('CP_MODEL_NOT_FOUND');
    g().when(enable()).thenRefused('CP_MODEL_NOT_FOUND');
  });
  it('enabling a disabled model records ModelEnabled; enabling one that is not disabled changes nothing', () => {
    g([registered, disabled]).when(enable()).then([enabled]);
    g([registered]).when(enable()).then([]);
    g([registered, disabled, enabled]).when(enable(40)).then([]);
    assert.equal(fold(modelDecider, [registered, disabled, enabled]).disabled, null);
  });
  it('replacing the files keeps the model disabled; removing it forgets the note', () => {
    const replaced: ModelEvent = {
      type: 'ModelRegistered',
      data: { ...facts(FP2), modelKey: 'llama', previousFingerprint: FP1, registeredBy: 'op', registeredAt: at(25) },
    };
    assert.equal(fold(modelDecider, [registered, disabled, replaced]).disabled?.reason, 'weights being replaced');
    const removed: ModelEvent = {
      type: 'ModelRemoved',
      data: { modelKey: 'llama', fingerprint: FP2, removedBy: 'op', removedAt: at(26) },
    };
    assert.equal(fold(modelDecider, [registered, disabled, replaced, removed]).disabled, null);
  });
});
