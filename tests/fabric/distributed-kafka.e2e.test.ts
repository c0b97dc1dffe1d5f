// The same four processes with Kafka between the scheduler-relay and the agent (NDIF_TRANSPORT=kafka, topics
// unique to this run), as docker-compose runs them, on one SQLite event store.
import { test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { requireService } from '../services/require.js';
import { runDistributed } from './distributed.js';

const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');
if (brokers !== undefined) {
  test('distributed entry points over Kafka', { timeout: 120_000 }, async () => {
    const run = randomUUID().slice(0, 8);
    const kafka = {
      NDIF_TRANSPORT: 'kafka',
      KAFKA_BROKERS: brokers,
      NDIF_TOPIC_ASSIGNMENTS: `t-${run}.assignments`,
      NDIF_TOPIC_AGENT_EVENTS: `t-${run}.agent-events`,
    };
    await runDistributed(
      () => kafka,
      () => kafka,
      true,
    );
  });
}
