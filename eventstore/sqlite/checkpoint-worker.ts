// The background checkpointer's thread (see checkpointer.ts): its own connection to the store's file, woken every
// `intervalMs` to copy the WAL back into the database file (PASSIVE: appends go on meanwhile) once enough events
// were written since the last checkpoint, or some were and `lingerMs` have passed since it.
// A PASSIVE checkpoint leaves out the frames appended while it ran; once one finds nothing appended meanwhile (the
// store paused), the next append starts the WAL over from its beginning. Under appends without a pause the WAL
// grows until the appending connection's own checkpoint (the safety bound) copies the rest and starts it over.
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import { CheckpointSlot, type CheckpointerData } from './checkpointer.js';

const { path, state, intervalMs, lingerMs, everyEvents } = workerData as CheckpointerData;
const db = new Database(path);
db.pragma('busy_timeout = 5000');
// Everything the store wrote before this thread was up is still to be checkpointed.
let checkpointed = 0;
let lastAt = Date.now();

while (Atomics.load(state, CheckpointSlot.stop) === 0) {
  Atomics.wait(state, CheckpointSlot.stop, 0, intervalMs);
  if (Atomics.load(state, CheckpointSlot.stop) !== 0) break;
  const written = Atomics.load(state, CheckpointSlot.written);
  const behind = (written - checkpointed) | 0;
  if (behind >= everyEvents || (behind > 0 && Date.now() - lastAt >= lingerMs)) {
    try {
      db.pragma('wal_checkpoint(PASSIVE)');
    } catch (e) {
      // The appending connection's own (larger) autocheckpoint still bounds the WAL; say why this one failed.
      parentPort?.postMessage({ error: e instanceof Error ? e.message : String(e) });
    }
    checkpointed = written;
    lastAt = Date.now();
  }
}
db.close();
