// Control-plane faults on distributed mode's processes (PostgreSQL event store, Kafka; tests/faults/distributed.ts):
// kill -9 of the command API during a burst of submits (scenarios/control-plane-kill.ts, as embedded), and kill -9
// of the scheduler-relay with work in flight, which makes Kafka and the relay deliver again what they had not
// committed (scenarios/relay-kill.ts).
import { after, before, it } from 'node:test';
import type { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import { requireService } from '../services/require.js';
import { startDistributed, type DistributedFaultFabric } from './distributed.js';
import { controlPlaneKillDuringBurst } from './scenarios/control-plane-kill.js';
import { relayKillWithWorkInFlight } from './scenarios/relay-kill.js';

const databaseUrl = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');

if (databaseUrl && brokers) {
  let f: DistributedFaultFabric;
  before(async () => {
    f = await startDistributed({ databaseUrl, brokers });
  });
  after(() => f?.close());

  it('distributed: kill -9 of the scheduler-relay with a request running and nine queued: each runs and completes once', async (t) => {
    await relayKillWithWorkInFlight(f, (s) => t.diagnostic(s));
  });

  it('distributed: kill -9 of the command API during a burst: no acknowledged submit lost, nothing duplicated, projection = fresh fold', async (t) => {
    await controlPlaneKillDuringBurst(
      f,
      {
        snapshots: (store) =>
          new PostgresCheckpoints((store as PostgresEventStore).pool, (store as PostgresEventStore).schema).load(
            'control-plane',
          ),
      },
      (s) => t.diagnostic(s),
    );
  });
}
