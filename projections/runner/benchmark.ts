// Replay rate of the state projection runner: rebuild a projection from position 0 to the head.
import type { EventStore } from '../../eventstore/port.js';
import type { Checkpoint, CheckpointWrite, Projection, SnapshotStore } from './projection.js';
import { ProjectionRunner } from './state-runner.js';

/** Keeps snapshots in memory: the replay bench measures the runner and the store, not a snapshot database. */
class MemorySnapshots implements SnapshotStore {
  private readonly rows = new Map<string, CheckpointWrite>();
  async load(name: string): Promise<Checkpoint | undefined> {
    const r = this.rows.get(name);
    if (r === undefined) return undefined;
    const cp: Checkpoint = { name: r.name, version: r.version, position: r.position };
    if (r.snapshotJson !== null) cp.snapshot = JSON.parse(r.snapshotJson);
    return cp;
  }
  async save(cp: CheckpointWrite): Promise<void> {
    this.rows.set(cp.name, cp);
  }
}

/** Rebuilds `projection` from position 0 to the current head; returns events per second and the final state. */
export async function benchReplay<S>(
  store: EventStore,
  projection: Projection<S>,
): Promise<{ eventsPerS: number; events: number; state: S }> {
  const head = await store.headPosition();
  const runner = new ProjectionRunner(store, projection, new MemorySnapshots(), { batchSize: 5000 });
  const t = performance.now();
  await runner.start();
  await runner.waitForPosition(head, 120_000);
  const ms = performance.now() - t;
  const status = await runner.stop();
  return { eventsPerS: (status.eventsApplied / ms) * 1000, events: status.eventsApplied, state: runner.state };
}
