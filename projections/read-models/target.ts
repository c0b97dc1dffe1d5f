// The checkpoint store of the read models, with each batch's transaction serialized against every other writer
// of the same read model (a second query API replica runs its own runner over the same tables): batches of two
// writers never interleave, so they cannot deadlock on rows locked in different orders, and the rows' position
// guards make the later writer's repeat of an event a no-op. The commits do not wait for their WAL flush
// (synchronous_commit off for these transactions only): a read model is rebuilt from the log, and rows and
// checkpoint commit together, so a database crash that loses the last commits only makes the runner apply those
// events again — while the request path saves two WAL flushes per batch.
import type pg from 'pg';
import type { Checkpoint, CheckpointWrite, ReadModelTarget } from '../runner/projection.js';
import type { PostgresCheckpoints } from '../runner/postgres-checkpoints.js';

function lockKey(schema: string, name: string): [number, number] {
  let h = 0x811c9dc5;
  for (const ch of `${schema}.${name}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
  return [0x524d5754 /* 'RMWT' */, h | 0];
}

export function serializedTarget(checkpoints: PostgresCheckpoints, name: string): ReadModelTarget<pg.PoolClient> {
  const [a, b] = lockKey(checkpoints.schema, name);
  return {
    transaction: (fn) =>
      checkpoints.transaction(async (tx) => {
        await tx.query('SET LOCAL synchronous_commit = off');
        await tx.query('SELECT pg_advisory_xact_lock($1, $2)', [a, b]);
        return fn(tx);
      }),
    loadCheckpoint: (tx: pg.PoolClient, n: string): Promise<Checkpoint | undefined> =>
      checkpoints.loadCheckpoint(tx, n),
    saveCheckpoint: (tx: pg.PoolClient, cp: CheckpointWrite): Promise<void> => checkpoints.saveCheckpoint(tx, cp),
  };
}
