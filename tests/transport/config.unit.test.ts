import { test } from 'node:test';
import assert from 'node:assert/strict';
import { transportConfigFromEnv, openTransport, partitionFor } from '../../transport/index.js';

test('the embedded default is the in-process transport', async () => {
  assert.deepEqual(transportConfigFromEnv({}), { kind: 'inprocess' });
  const t = await openTransport(transportConfigFromEnv({ KAFKA_BROKERS: '127.0.0.1:9092' }));
  assert.equal(t.kind, 'inprocess', 'KAFKA_BROKERS alone does not switch transports');
  await t.close();
});

test('NDIF_TRANSPORT=kafka reads brokers, client id, partitions and linger', () => {
  assert.deepEqual(
    transportConfigFromEnv({
      NDIF_TRANSPORT: 'kafka',
      KAFKA_BROKERS: 'a:1, b:2',
      KAFKA_CLIENT_ID: 'agent-3',
      NDIF_KAFKA_PARTITIONS: '8',
      NDIF_KAFKA_LINGER_MS: '2',
    }),
    {
      kind: 'kafka',
      kafka: {
        brokers: ['a:1', 'b:2'],
        clientId: 'agent-3',
        topicPartitions: { 'ndif.assignments.agent.*': 1, 'ndif.assignments.agent-h.*': 1 },
        partitions: 8,
        lingerMs: 2,
      },
    },
  );
});

test("NDIF_KAFKA_SESSION_TIMEOUT_MS sets the consumers' session, with heartbeats at most a third of it", () => {
  const kafka = (v: string) =>
    (
      transportConfigFromEnv({ NDIF_TRANSPORT: 'kafka', KAFKA_BROKERS: 'a:1', NDIF_KAFKA_SESSION_TIMEOUT_MS: v }) as {
        kafka: unknown;
      }
    ).kafka;
  assert.deepEqual(kafka('6000'), {
    brokers: ['a:1'],
    clientId: 'ndif',
    topicPartitions: { 'ndif.assignments.agent.*': 1, 'ndif.assignments.agent-h.*': 1 },
    consumer: { sessionTimeoutMs: 6000, heartbeatIntervalMs: 1000 },
  });
  assert.deepEqual(kafka('1500'), {
    brokers: ['a:1'],
    clientId: 'ndif',
    topicPartitions: { 'ndif.assignments.agent.*': 1, 'ndif.assignments.agent-h.*': 1 },
    consumer: { sessionTimeoutMs: 1500, heartbeatIntervalMs: 500 },
  });
});

test('bad transport settings are refused with TRANSPORT_CONFIG_INVALID and a hint', () => {
  const refused = (env: NodeJS.ProcessEnv, hint: RegExp) =>
    assert.throws(
      () => transportConfigFromEnv(env),
      (e: unknown) => {
        const err = e as { code?: string; hint?: string };
        assert.equal(err.code, 'TRANSPORT_CONFIG_INVALID');
        assert.match(err.hint ?? '', hint);
        return true;
      },
    );
  refused({ NDIF_TRANSPORT: 'rabbit' }, /inprocess|kafka/);
  refused({ NDIF_TRANSPORT: 'kafka' }, /KAFKA_BROKERS/);
  refused({ NDIF_TRANSPORT: 'kafka', KAFKA_BROKERS: 'a:1', NDIF_KAFKA_PARTITIONS: '0' }, /NDIF_KAFKA_PARTITIONS/);
  refused({ NDIF_TRANSPORT: 'kafka', KAFKA_BROKERS: 'a:1', NDIF_KAFKA_LINGER_MS: '-1' }, /NDIF_KAFKA_LINGER_MS/);
  refused(
    { NDIF_TRANSPORT: 'kafka', KAFKA_BROKERS: 'a:1', NDIF_KAFKA_SESSION_TIMEOUT_MS: '500' },
    /NDIF_KAFKA_SESSION_TIMEOUT_MS/,
  );
});

test("keys map to partitions as Kafka's default partitioner (murmur2) does", () => {
  // murmur2 values computed by kafkajs's DefaultPartitioner implementation
  const vectors: [string, number][] = [
    ['a', -1563381124],
    ['ab', 316155434],
    ['abc', 479470107],
    ['abcd', -1323649548],
    ['agent-1', 1915575295],
    ['request-123456', 717245426],
    ['ünï', -570454509],
  ];
  for (const [key, hash] of vectors) {
    for (const n of [1, 3, 4, 16]) assert.equal(partitionFor(key, n), (hash & 0x7fffffff) % n, `${key} over ${n}`);
  }
});
