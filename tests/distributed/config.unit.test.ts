// Distributed mode's small pure parts: when the query API runs the PostgreSQL read models (fabric/read-models.ts),
// and the relay's memory of RequestReceived payloads (transport/relay/received-cache.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StoredEvent } from '../../eventstore/port.js';
import { readModelsConfigFromEnv } from '../../fabric/read-models.js';
import { ReceivedCache } from '../../transport/relay/received-cache.js';

describe('NDIF_READ_MODELS', () => {
  const db = 'postgres://u@h:5432/d';
  it('defaults to postgres with a PostgreSQL or KurrentDB event store and DATABASE_URL, off otherwise', () => {
    assert.deepEqual(readModelsConfigFromEnv({ NDIF_EVENT_STORE: 'postgres', DATABASE_URL: db }), {
      connectionString: db,
      schema: 'public',
    });
    assert.deepEqual(
      readModelsConfigFromEnv({ NDIF_EVENT_STORE: 'kurrentdb', DATABASE_URL: db, NDIF_READ_MODEL_SCHEMA: 'rm' }),
      { connectionString: db, schema: 'rm' },
    );
    assert.equal(readModelsConfigFromEnv({ DATABASE_URL: db }), undefined, 'SQLite event store');
    assert.equal(readModelsConfigFromEnv({ NDIF_EVENT_STORE: 'postgres' }), undefined, 'no DATABASE_URL');
    assert.equal(
      readModelsConfigFromEnv({ NDIF_EVENT_STORE: 'postgres', DATABASE_URL: db, NDIF_READ_MODELS: 'off' }),
      undefined,
    );
    assert.deepEqual(readModelsConfigFromEnv({ DATABASE_URL: db, NDIF_READ_MODELS: 'postgres' }), {
      connectionString: db,
      schema: 'public',
    });
  });
  it('refuses a bad value and postgres without DATABASE_URL, with FABRIC_CONFIG_INVALID and the fix', () => {
    assert.throws(
      () => readModelsConfigFromEnv({ NDIF_READ_MODELS: 'yes' }),
      (e: Error & { code?: string; hint?: string }) =>
        e.code === 'FABRIC_CONFIG_INVALID' && /postgres or off/.test(e.message),
    );
    assert.throws(
      () => readModelsConfigFromEnv({ NDIF_READ_MODELS: 'postgres' }),
      (e: Error & { code?: string; hint?: string }) =>
        e.code === 'FABRIC_CONFIG_INVALID' &&
        /needs DATABASE_URL/.test(e.message) &&
        /NDIF_READ_MODELS=off/.test(e.hint ?? ''),
    );
  });
});

describe('the relay remembers received payloads', () => {
  let position = 0;
  const ev = (type: string, requestId: string, data: Record<string, unknown> = {}): StoredEvent => ({
    id: `00000000-0000-4000-8000-${String(++position).padStart(12, '0')}`,
    type,
    version: 1,
    data: { requestId, ...data } as StoredEvent['data'],
    metadata: { correlationId: 'c', causationId: 'c', actor: 'key:u', at: '2025-01-01T00:00:00.000Z' },
    streamId: `request-${requestId}`,
    revision: 0,
    position,
  });

  it('hands a dispatch the payload, trust and options once, and forgets finished requests', () => {
    const c = new ReceivedCache();
    c.observe(
      ev('RequestReceived', 'a', { trusted: true, payload: { invokes: [1] }, options: { steps: 2, timeoutMs: 5 } }),
    );
    c.observe(ev('RequestReceived', 'b', { trusted: false, payload: { invokes: [2] }, options: { steps: 1 } }));
    assert.deepEqual(c.take('a'), { trusted: true, payload: { invokes: [1] }, options: { steps: 2, timeoutMs: 5 } });
    assert.equal(c.take('a'), undefined, 'a second dispatch (after a requeue) reads the stream');
    c.observe(ev('RequestCancelled', 'b'));
    assert.equal(c.take('b'), undefined);
    assert.equal(c.size, 0);
  });

  it('keeps its payloads under its byte bound, dropping the oldest first, and skips a payload too large to keep', () => {
    const c = new ReceivedCache(4000);
    for (let i = 0; i < 10; i++) c.observe(ev('RequestReceived', `r${i}`, { payload: { block: 'x'.repeat(500) } }));
    assert.equal(c.size, 7, 'seven payloads of 512 bytes fit in 4000');
    assert.equal(c.take('r0'), undefined);
    assert.ok(c.take('r9') !== undefined);
    c.observe(ev('RequestReceived', 'huge', { payload: { block: 'x'.repeat(2000) } }));
    assert.equal(c.take('huge'), undefined);
  });
});
