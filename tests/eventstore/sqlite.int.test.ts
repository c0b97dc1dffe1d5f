// The event store contract on the embedded SQLite adapter (a real file in a temp folder).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { runEventStoreContract } from './contract.js';

runEventStoreContract({
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-es-'));
    const path = join(dir, 'events.db');
    return {
      open: async () => new SqliteEventStore({ path, pollIntervalMs: 20 }),
      destroy: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
});
