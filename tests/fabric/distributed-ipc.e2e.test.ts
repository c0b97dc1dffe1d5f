// The distributed entry points (command-api, query-api, scheduler-relay, gpu-agent) as four OS processes over
// one SQLite event store, the agent reaching the scheduler-relay's broker through the IPC socket: a deploy of
// two replicas and four requests through the HTTP APIs all complete; health endpoints answer; SIGTERM stops each.
import { test } from 'node:test';
import { join } from 'node:path';
import { runDistributed } from './distributed.js';

test('distributed entry points over the IPC transport', { timeout: 90_000 }, async () => {
  await runDistributed(
    (tmp) => ({ NDIF_TRANSPORT: 'inprocess', NDIF_IPC_SOCKET: join(tmp, 'relay.sock') }),
    (tmp) => ({ NDIF_TRANSPORT: 'ipc', NDIF_IPC_SOCKET: join(tmp, 'relay.sock') }),
  );
});
