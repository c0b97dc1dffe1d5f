// The size a registered model is placed with: NDIF's formula (weights × 1.15 + 500 MiB), or — when the runtime's
// memory estimate says more — the weights, their packed copies and the peak of a forward pass's activations (what it
// serves by default); a deployment that reserves room for gradients counts the backward's peak instead.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultModelSizeBytes, MIB, modelSizeBytes } from '../../domain/placement/size.js';
import { entryOf } from '../../catalog/registered.js';
import type { RegisteredModel } from '../../projections/models/projection.js';

test('the estimate wins when it says more than the formula; the formula when it says less or there is none', () => {
  const weights = 500 * MIB;
  const big = { forwardActivationBytes: 480 * MIB, backwardActivationBytes: 5900 * MIB, packedWeightsBytes: 490 * MIB };
  assert.equal(defaultModelSizeBytes(weights, big), weights + big.packedWeightsBytes + big.forwardActivationBytes);
  assert.equal(
    defaultModelSizeBytes(weights, big, { gradients: true }),
    weights + big.packedWeightsBytes + big.backwardActivationBytes,
  );
  const small = { forwardActivationBytes: MIB, backwardActivationBytes: 2 * MIB, packedWeightsBytes: MIB };
  assert.equal(defaultModelSizeBytes(weights, small), modelSizeBytes(weights));
  assert.equal(defaultModelSizeBytes(weights), modelSizeBytes(weights));
});

test('a registered model with the estimate gets it as its default size; one recorded without it, none', () => {
  const base = {
    modelKey: 'm',
    fingerprint: 'a'.repeat(64),
    dir: '/m',
    files: [{ name: 'model.onnx', bytes: 1, sha256: 'b'.repeat(64) }],
    family: 'gpt2',
    architecture: 'GPT2LMHeadModel',
    inputs: ['input_ids'],
    outputs: ['logits'],
    moduleCount: 10,
    dtype: 'float32',
    weightsBytes: 500 * MIB,
    padding: 'left',
    generative: true,
    vocabSize: 100,
    maxPositions: 1024,
    previousFingerprint: null,
    registeredBy: 'op',
    registeredAt: '2026-01-01T00:00:00.000Z',
    position: 1,
  } as unknown as RegisteredModel;
  const memory = {
    sequence: 1024,
    forwardActivationBytes: 480 * MIB,
    backwardActivationBytes: 5900 * MIB,
    packedWeightsBytes: 490 * MIB,
  };
  const entry = entryOf({ ...base, memory });
  assert.equal(entry.defaults.sizeBytes, 500 * MIB + 490 * MIB + 480 * MIB, 'forward passes by default');
  assert.equal(entry.defaults.gradientSizeBytes, 500 * MIB + 490 * MIB + 5900 * MIB, 'a backward with --gradients');
  assert.equal(entryOf(base).defaults.sizeBytes, undefined);
});
