// An agent that goes away and comes back within its grace period, with 12 requests for its only replica: one
// running, eleven queued. The agent is first frozen (SIGSTOP: no heartbeats, so the scheduler marks it
// UNRESPONSIVE and waits), then killed (kill -9) and restarted as a new boot. Nothing is errored, nothing is
// dropped: the running request is requeued (AGENT_RESTARTED) and runs again; the eleven queued ones waited and
// run once each; 12 of 12 complete.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { readLog, requestStream, type FaultFabric } from '../fabric.js';
import { call, deploy, expectOk, getRequest, hot, requestIn, slowBlock, submit, until } from '../http.js';

const data = <T>(e: { data: unknown }) => e.data as T;

export async function agentRestartWithQueue(
  f: FaultFabric,
  opts: { heartbeatTimeoutMs: number },
  log: (s: string) => void = () => undefined,
): Promise<void> {
  await expectOk(deploy(f, { model: 'gpt2-tiny', minDeploymentMs: 0 }), 'deploy');
  await hot(f, 'gpt2-tiny');
  const ids = Array.from({ length: 12 }, (_, i) => `restart-${String(i + 1).padStart(2, '0')}`);
  // The first one runs long enough to be caught running; the others are short.
  for (const [i, id] of ids.entries())
    await expectOk(submit(f, id, { block: slowBlock(i === 0 ? 3000 : 300) }), `submit ${id}`);
  const first = await requestIn(f, ids[0]!, ['RUNNING'], 20_000);
  assert.equal(first.attempt, 1);

  f.freezeAgent();
  const agentState = async () =>
    (
      (await call(f.queryUrl, '/agents', { headers: f.operatorHeaders })).body.agents as Array<{
        agentId: string;
        state: string;
      }>
    ).find((a) => a.agentId === f.agentId)?.state;
  await until(
    'the frozen agent UNRESPONSIVE',
    async () => ((await agentState()) === 'UNRESPONSIVE' ? true : undefined),
    opts.heartbeatTimeoutMs + 10_000,
  );
  // While it is away, nothing is failed or moved: the eleven wait in the queue, the first stays where it was.
  await sleep(300);
  const during = await Promise.all(ids.map(async (id) => String((await getRequest(f, id)).body.status)));
  log(`while UNRESPONSIVE: ${during.join(' ')}`);
  assert.ok(!during.some((s) => s === 'ERROR' || s === 'COMPLETED'), during.join(' '));
  assert.ok(
    during.slice(1).every((s) => s === 'QUEUED'),
    during.join(' '),
  );

  const killed = await f.killAgent();
  f.thawAgent();
  await f.agentBack(killed);
  const done = await Promise.all(
    ids.map((id) => requestIn(f, id, ['COMPLETED', 'ERROR', 'CANCELLED'], f.mode === 'distributed' ? 60_000 : 40_000)),
  );
  log(`after the restart: ${done.map((d) => d.status).join(' ')}`);
  assert.deepEqual(
    done.map((d) => d.status),
    ids.map(() => 'COMPLETED'),
    '12 of 12 complete',
  );

  const { store, close } = await f.openStore();
  try {
    const all = await readLog(store);
    const agentEvents = all.filter((e) => e.streamId === `agent-${f.agentId}`).map((e) => e.type);
    log(`agent stream: ${agentEvents.join(' ')}`);
    assert.ok(agentEvents.includes('AgentUnresponsive'), 'it was marked unresponsive');
    assert.ok(!agentEvents.includes('AgentLost'), 'and never lost: it came back within its grace period');
    for (const [i, id] of ids.entries()) {
      const stream = requestStream(all, id);
      const types = stream.map((e) => e.type);
      assert.equal(types.filter((t) => t === 'RequestCompleted').length, 1, `${id}: one RequestCompleted`);
      assert.ok(!types.includes('RequestFailed'), `${id} never failed`);
      const requeues = stream
        .filter((e) => e.type === 'RequestRequeued')
        .map((e) => data<{ reason: string }>(e).reason);
      const dispatches = stream.filter((e) => e.type === 'RequestDispatched').length;
      if (i === 0) {
        assert.deepEqual(requeues, ['AGENT_RESTARTED'], 'the running request was requeued, not lost');
        assert.equal(dispatches, 2);
      } else {
        assert.deepEqual(requeues, [], `${id} had not started: it just waited`);
        assert.equal(dispatches, 1, `${id} dispatched once`);
      }
    }
  } finally {
    await close();
  }
}
