// `npm run bench -- eventstore [--full]`: the embedded SQLite event store. Commands decided and appended per second
// through handleCommand (sequential and 16 at a time), and readAll / subscribe / projection replay over 200k events.
// --full also measures synchronous=FULL appends.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchCommands, benchReadAll, benchSubscribe, fillStore } from '../eventstore/benchmark.js';
import { SqliteEventStore } from '../eventstore/sqlite/store.js';
import { benchReplay } from '../projections/runner/benchmark.js';
import type { Projection } from '../projections/runner/projection.js';

const countByType: Projection<Record<string, number>> = {
  name: 'count_by_type',
  version: 1,
  initialState: () => ({}),
  apply(s, e) {
    s[e.type] = (s[e.type] ?? 0) + 1;
    return s;
  },
};

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-bench-es-'));
  try {
    const result: Record<string, unknown> = {};
    const store = new SqliteEventStore({ path: join(dir, 'normal.db') });
    result.commands_per_s = Math.round(await benchCommands(store, { commands: 10_000 }));
    result.commands_per_s_16_concurrent = Math.round(await benchCommands(store, { commands: 20_000, concurrency: 16 }));
    const fillMs = await fillStore(store, 200_000);
    result.bulk_append_events_per_s = Math.round((200_000 / fillMs) * 1000);
    const read = await benchReadAll(store);
    result.log_events = read.events;
    result.read_all_events_per_s = Math.round(read.eventsPerS);
    result.subscribe_events_per_s = Math.round(await benchSubscribe(store));
    result.replay_events_per_s = Math.round((await benchReplay(store, countByType)).eventsPerS);
    await store.close();
    if (args.includes('--full')) {
      const full = new SqliteEventStore({ path: join(dir, 'full.db'), synchronous: 'full' });
      result.commands_per_s_sync_full = Math.round(await benchCommands(full, { commands: 2_000 }));
      result.commands_per_s_sync_full_16_concurrent = Math.round(
        await benchCommands(full, { commands: 10_000, concurrency: 16 }),
      );
      await full.close();
    }
    return result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
