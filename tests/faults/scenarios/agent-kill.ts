// kill -9 of the GPU agent process in the middle of a request: the request goes back to the queue (the user sees
// it QUEUED again, with the reason), runs again on the restarted agent (a new boot) and completes exactly once.
import assert from 'node:assert/strict';
import { TestSocket, type WsMessage } from '../../query-api/ws-client.js';
import { requestStream, readLog, type FaultFabric } from '../fabric.js';
import { deploy, expectOk, getRequest, hot, slowBlock, submit } from '../http.js';

const data = <T>(e: { data: unknown }) => e.data as T;

export async function agentKillMidRequest(f: FaultFabric, log: (s: string) => void = () => undefined): Promise<void> {
  await expectOk(deploy(f, { model: 'gpt2-tiny', minDeploymentMs: 0 }), 'deploy');
  await hot(f, 'gpt2-tiny');
  const ws = await TestSocket.open(f.queryUrl);
  try {
    const id = 'kill-mid-request';
    await ws.subscribe(id);
    await expectOk(submit(f, id, { block: slowBlock(1500) }), 'submit');
    // The block has logged its line and sleeps inside the forward pass: the request is running on the agent.
    await ws.until(
      (ms) => ms.some((m) => m.requestId === id && m.status === 'LOG'),
      'the LOG line of attempt 1',
      20_000,
    );
    const killed = await f.killAgent();
    const boot = await f.agentBack(killed);
    log(`agent pid ${killed.pid} boot ${killed.bootId} killed; back as boot ${boot}`);
    // Distributed, the new boot waits for its Kafka group's rebalance before it gets the RELOAD.
    await ws.untilStatus(id, 'COMPLETED', f.mode === 'distributed' ? 60_000 : 30_000);
    await ws.until((ms) => ms.some((m) => m.type === 'ended' && m.requestId === id), 'ended', 5000);

    const seen = ws.statuses(id);
    const names = seen.map((m) => String(m.status));
    log(names.join(' '));
    const running = names.indexOf('RUNNING');
    assert.ok(running > 0, 'it ran');
    const back = seen.slice(running + 1).find((m) => m.requeued !== undefined) as WsMessage & {
      requeued: { reason: string; attempt: number };
    };
    assert.ok(back !== undefined, `a wait with a requeue reason follows RUNNING: ${names.join(' ')}`);
    assert.equal(back.status, 'QUEUED', 'the user sees it return to QUEUED');
    assert.equal(back.requeued.reason, 'AGENT_RESTARTED');
    assert.equal(back.requeued.attempt, 1);
    // Then it waits (DEPLOYING while the new boot reloads the replica), and runs once more.
    const after = names.slice(names.indexOf('QUEUED', running)).filter((n) => n !== 'LOG');
    const waits = after.slice(0, after.indexOf('DISPATCHED'));
    assert.ok(
      waits.length > 0 && waits.every((n) => ['QUEUED', 'DEPLOYING', 'PROVISIONING'].includes(n)),
      after.join(' '),
    );
    assert.deepEqual(after.slice(waits.length), ['DISPATCHED', 'RUNNING', 'COMPLETED']);
    assert.equal(names.filter((n) => n === 'COMPLETED').length, 1, 'one COMPLETED on the websocket');
    assert.ok(!names.includes('ERROR'));
    assert.equal(seen.at(-1)!.attempt, 2);
    const cursors = seen.map((m) => Number(String(m.cursor).split(':')[0]));
    assert.deepEqual(
      cursors,
      [...cursors].sort((a, b) => a - b),
      'cursors increase',
    );

    const view = (await getRequest(f, id)).body;
    assert.equal(view.status, 'COMPLETED');
    assert.deepEqual(
      (view.logs as Array<{ attempt: number; line: string }>).map((l) => [l.attempt, l.line]),
      [
        [1, 'slow 1500'],
        [2, 'slow 1500'],
      ],
    );

    const { store, close } = await f.openStore();
    try {
      const stream = requestStream(await readLog(store), id);
      const types = stream.map((e) => e.type);
      assert.equal(types.filter((t) => t === 'RequestCompleted').length, 1, `one RequestCompleted: ${types.join(' ')}`);
      assert.deepEqual(
        stream.filter((e) => e.type === 'RequestDispatched').map((e) => data<{ attempt: number }>(e).attempt),
        [1, 2],
      );
      const requeues = stream
        .filter((e) => e.type === 'RequestRequeued')
        .map((e) => data<{ reason: string; attempt: number }>(e));
      assert.deepEqual(
        requeues.map((r) => [r.reason, r.attempt]),
        [['AGENT_RESTARTED', 1]],
      );
      assert.ok(!types.includes('RequestFailed'));
    } finally {
      await close();
    }
  } finally {
    await ws.close();
  }
}
