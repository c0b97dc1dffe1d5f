// The append decision shared by the adapters: write, idempotent repeat, or refusal.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planAppend, type StoredIdentity } from '../../eventstore/append-plan.js';
import { isFabricError } from '../../protocol/errors.js';

const stored = (eventId: string, revision: number, position: number, streamId = 's'): StoredIdentity => ({
  eventId,
  streamId,
  revision,
  position,
});
const code = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    assert.ok(isFabricError(e));
    return e.code;
  }
  return 'no error';
};

describe('planAppend', () => {
  it('writes when no id is stored and the expected revision holds', () => {
    assert.equal(planAppend('s', ['a'], 'no_stream', [], -1), 'write');
    assert.equal(planAppend('s', ['a'], 3, [], 3), 'write');
    assert.equal(planAppend('s', ['a'], 'exists', [], 0), 'write');
    assert.equal(planAppend('s', ['a'], 'any', [], 7), 'write');
  });

  it('refuses a wrong expected revision', () => {
    assert.equal(
      code(() => planAppend('s', ['a'], 'no_stream', [], 0)),
      'ES_WRONG_EXPECTED_REVISION',
    );
    assert.equal(
      code(() => planAppend('s', ['a'], 'exists', [], -1)),
      'ES_WRONG_EXPECTED_REVISION',
    );
    assert.equal(
      code(() => planAppend('s', ['a'], 2, [], 3)),
      'ES_WRONG_EXPECTED_REVISION',
    );
  });

  it('answers an exact repeat with the original result, whatever came after it', () => {
    const existing = [stored('b', 5, 21), stored('a', 4, 20)];
    assert.deepEqual(planAppend('s', ['a', 'b'], 3, existing, 9), { nextRevision: 5, position: 21 });
    assert.deepEqual(planAppend('s', ['a', 'b'], 'any', existing, 9), { nextRevision: 5, position: 21 });
    assert.deepEqual(planAppend('s', ['x'], 'no_stream', [stored('x', 0, 1)], 0), { nextRevision: 0, position: 1 });
  });

  it('refuses a repeat under an expectation it did not meet', () => {
    assert.equal(
      code(() => planAppend('s', ['a', 'b'], 1, [stored('a', 4, 20), stored('b', 5, 21)], 9)),
      'ES_WRONG_EXPECTED_REVISION',
    );
    assert.equal(
      code(() => planAppend('s', ['a'], 'no_stream', [stored('a', 4, 20)], 9)),
      'ES_WRONG_EXPECTED_REVISION',
    );
  });

  it('refuses partial overlap, another order, and ids stored in another stream', () => {
    assert.equal(
      code(() => planAppend('s', ['a', 'n'], 'any', [stored('a', 0, 1)], 0)),
      'ES_EVENT_ID_CONFLICT',
    );
    assert.equal(
      code(() => planAppend('s', ['b', 'a'], 'any', [stored('a', 0, 1), stored('b', 1, 2)], 1)),
      'ES_EVENT_ID_CONFLICT',
    );
    assert.equal(
      code(() => planAppend('s', ['a'], 'any', [stored('a', 0, 1, 'other')], -1)),
      'ES_EVENT_ID_CONFLICT',
    );
    assert.equal(
      code(() => planAppend('s', ['a', 'b'], 'any', [stored('a', 0, 1), stored('b', 2, 3)], 2)),
      'ES_EVENT_ID_CONFLICT',
    );
  });
});
