// The event store contract on the KurrentDB adapter. No KurrentDB server exists on this project's machines and none
// can be installed here, so this runs only where KURRENTDB_URL points at a real server; it is never faked.
import { it } from 'node:test';
import { KurrentDbEventStore } from '../../eventstore/kurrentdb/store.js';
import { runEventStoreContract } from './contract.js';

const url = process.env.KURRENTDB_URL;
if (url === undefined || url === '') {
  const why =
    'KURRENTDB_URL is not set: no KurrentDB server runs on this machine and none can be installed here, and the contract is never run against a fake; set KURRENTDB_URL (e.g. kurrentdb://127.0.0.1:2113?tls=false) to run it against a real server';
  it('KurrentDB event store contract', { skip: why }, () => undefined);
} else {
  runEventStoreContract({
    name: 'kurrentdb',
    async create() {
      return {
        open: async () => new KurrentDbEventStore({ connectionString: url, pollIntervalMs: 100 }),
        // A shared server: the contract's streams carry a unique prefix; nothing to drop.
        destroy: async () => undefined,
      };
    },
  });
}
