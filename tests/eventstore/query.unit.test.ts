// Audit query filters: only indexed filters, never an unfiltered query, values checked.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ALL_QUERY_FILTERS, normalizeQuery } from '../../eventstore/query.js';
import { isFabricError } from '../../protocol/errors.js';

const code = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    assert.ok(isFabricError(e));
    return e.code;
  }
  return 'no error';
};

describe('normalizeQuery', () => {
  it('normalizes every indexed filter, time bounds to epoch ms', () => {
    assert.deepEqual(
      normalizeQuery(
        {
          actor: 'key:a',
          correlationId: 'c',
          causationId: 'k',
          streamPrefix: 'request-',
          type: 'T',
          fromAt: '2025-01-01T00:00:00.000Z',
          toAt: '2025-01-02T00:00:00Z',
          limit: 5,
          afterPosition: 9,
        },
        ALL_QUERY_FILTERS,
        'sqlite',
      ),
      {
        actor: 'key:a',
        correlationId: 'c',
        causationId: 'k',
        streamPrefix: 'request-',
        type: 'T',
        fromAtMs: 1735689600000,
        toAtMs: 1735776000000,
        afterPosition: 9,
        limit: 5,
      },
    );
  });

  it('refuses no filter, paging alone, and filters on data that is not indexed', () => {
    assert.equal(
      code(() => normalizeQuery({}, ALL_QUERY_FILTERS, 'sqlite')),
      'ES_QUERY_UNFILTERED',
    );
    assert.equal(
      code(() => normalizeQuery({ limit: 3, afterPosition: 1 }, ALL_QUERY_FILTERS, 'sqlite')),
      'ES_QUERY_UNFILTERED',
    );
    assert.equal(
      code(() => normalizeQuery({ actor: undefined }, ALL_QUERY_FILTERS, 'sqlite')),
      'ES_QUERY_UNFILTERED',
    );
    assert.equal(
      code(() => normalizeQuery({ model: 'gpt2' } as never, ALL_QUERY_FILTERS, 'sqlite')),
      'ES_QUERY_FILTER_NOT_INDEXED',
    );
    assert.equal(
      code(() => normalizeQuery({ actor: 'a' }, [], 'kurrentdb')),
      'ES_QUERY_FILTER_NOT_INDEXED',
    );
  });

  it('refuses bad values', () => {
    for (const bad of [
      { actor: 7 },
      { type: '' },
      { fromAt: '2025-01-01' },
      { toAt: 'now' },
      { actor: 'a', limit: 0 },
      { actor: 'a', limit: 10_001 },
      { actor: 'a', afterPosition: -1 },
    ]) {
      assert.equal(
        code(() => normalizeQuery(bad as never, ALL_QUERY_FILTERS, 'sqlite')),
        'ES_QUERY_INVALID',
        JSON.stringify(bad),
      );
    }
  });
});
