// Redelivery at user level, distributed mode: kill -9 of the scheduler-relay (scheduler, relay, its projection)
// while the GPU agent keeps running a request and ten more are queued. The agent finishes what it runs and
// reports it into Kafka with nobody reading; the restarted relay resumes from its checkpoint — it publishes again
// the assignments after it (the agent drops those it has handled) and reads again the reports not yet committed
// (their command ids make them no-ops). Every request runs once and completes once; nothing is requeued (the agent
// never went away); no event is stored twice.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { readLog, requestStream } from '../fabric.js';
import type { DistributedFaultFabric } from '../distributed.js';
import { deploy, expectOk, getRequest, hot, requestIn, slowBlock, submit, until } from '../http.js';

export async function relayKillWithWorkInFlight(
  f: DistributedFaultFabric,
  log: (s: string) => void = () => undefined,
): Promise<void> {
  await expectOk(deploy(f, { model: 'gpt2-tiny', minDeploymentMs: 0 }), 'deploy');
  await hot(f, 'gpt2-tiny', 1, 45_000);
  const ids = Array.from({ length: 10 }, (_, i) => `relay-kill-${i}`);
  // The first runs 3 s, the others 300 ms each behind it (one at a time): the kill comes while one of them is
  // RUNNING, whichever the query API shows first. Waiting for the first alone missed it on a loaded machine: its
  // RUNNING can be over before the ten submits are, or last less than the read model's lag.
  for (const [i, id] of ids.entries())
    await expectOk(submit(f, id, { block: slowBlock(i === 0 ? 3000 : 300) }), `submit ${id}`);
  const running = await until(
    'one of the ten requests RUNNING',
    async () => {
      for (const id of ids) if ((await getRequest(f, id)).body.status === 'RUNNING') return id;
      return undefined;
    },
    30_000,
  );
  await f.killSchedulerRelay();
  log(`scheduler-relay killed with ${running} running, the ones after it queued`);
  await sleep(1500);
  await f.restartSchedulerRelay();
  log('scheduler-relay restarted');
  const done = await Promise.all(ids.map((id) => requestIn(f, id, ['COMPLETED', 'ERROR', 'CANCELLED'], 60_000)));
  assert.deepEqual(
    done.map((d) => d.status),
    ids.map(() => 'COMPLETED'),
  );
  const { store, close } = await f.openStore();
  try {
    const all = await readLog(store);
    assert.equal(new Set(all.map((e) => e.id)).size, all.length, 'no event stored twice');
    for (const id of ids) {
      const types = requestStream(all, id).map((e) => e.type);
      for (const t of ['RequestDispatched', 'RequestStarted', 'RequestCompleted'])
        assert.equal(types.filter((x) => x === t).length, 1, `${id}: one ${t} (${types.join(' ')})`);
      assert.ok(!types.includes('RequestRequeued') && !types.includes('RequestFailed'), `${id}: ${types.join(' ')}`);
    }
    const boots = all.filter((e) => e.type === 'AgentRegistered').length;
    assert.equal(boots, 1, 'the agent was never restarted');
  } finally {
    await close();
  }
}
