// An operator's placement and eviction while requests run and wait. One 1 GiB GPU holds one of two 600 MiB
// models. With A's requests running and queued, the operator deploys B: A is demoted HOT → WARM (its running
// request requeued PREEMPTED) while a user cancels a queued request; A comes back from the CPU cache once B,
// idle, makes room. Then the operator evicts A while a request runs (requeued PREEMPTED) and a user cancels a
// queued one; A is deployed again on demand, and evicted once more while a user cancels the very request that
// runs (the requeue and the cancel race). The rest complete. Nothing is lost, nothing completes twice, and a cancelled request
// is never dispatched after its cancel.
import assert from 'node:assert/strict';
import { TestSocket } from '../../query-api/ws-client.js';
import { readLog, requestStream, type FaultFabric } from '../fabric.js';
import { cancel, deploy, evict, expectOk, hot, requestIn, slowBlock, submit, until } from '../http.js';

const MIB = 1024 * 1024;
const data = <T>(e: { data: unknown }) => e.data as T;

/** The fabric must serve `gpt2-tiny` and `tiny-b` with one agent GPU of 1 GiB (see preemptionFabricOptions). */
export async function preemptionWindow(f: FaultFabric, log: (s: string) => void = () => undefined): Promise<void> {
  const A = 'gpt2-tiny';
  const B = 'tiny-b';
  await expectOk(deploy(f, { model: A, sizeBytes: 600 * MIB, minDeploymentMs: 0 }), 'deploy A');
  await hot(f, A);
  const ids = ['pre-1', 'pre-2', 'pre-3', 'pre-4', 'pre-5', 'pre-6'];
  const ws = await TestSocket.open(f.queryUrl);
  try {
    for (const id of ids) await ws.subscribe(id);
    for (const id of ids) await expectOk(submit(f, id, { model: A, block: slowBlock(700) }), `submit ${id}`);
    await ws.until((ms) => ms.some((m) => m.requestId === 'pre-1' && m.status === 'LOG'), 'pre-1 running', 20_000);

    // Window 1: B needs A's room — A is demoted while pre-1 runs; the user cancels pre-3 (queued) meanwhile.
    const [deployed, cancelled3] = await Promise.all([
      deploy(f, { model: B, sizeBytes: 600 * MIB, minDeploymentMs: 0 }),
      cancel(f, 'pre-3'),
    ]);
    assert.equal(deployed.status, 202, JSON.stringify(deployed.body));
    assert.equal(cancelled3.status, 200, JSON.stringify(cancelled3.body));
    await ws.until(
      (ms) =>
        ms.some(
          (m) => m.requestId === 'pre-1' && (m.requeued as { reason?: string } | undefined)?.reason === 'PREEMPTED',
        ),
      'pre-1 requeued PREEMPTED',
      20_000,
    );
    log('pre-1 requeued PREEMPTED by the demotion of A');

    // A comes back (B, idle and old enough, is demoted in turn); pre-1 runs again and completes.
    await ws.untilStatus('pre-1', 'COMPLETED', 30_000);

    // Window 2: the operator evicts A while pre-2 runs; the user cancels pre-4 (queued) meanwhile.
    await ws.until((ms) => ms.some((m) => m.requestId === 'pre-2' && m.status === 'LOG'), 'pre-2 running', 30_000);
    const [evicted, cancelled4] = await Promise.all([evict(f, { model: A }), cancel(f, 'pre-4')]);
    assert.equal(evicted.status, 202, JSON.stringify(evicted.body));
    assert.equal(cancelled4.status, 200, JSON.stringify(cancelled4.body));
    await ws.until(
      (ms) =>
        ms.some(
          (m) => m.requestId === 'pre-2' && (m.requeued as { reason?: string } | undefined)?.reason === 'PREEMPTED',
        ),
      'pre-2 requeued PREEMPTED',
      20_000,
    );
    log('pre-2 requeued PREEMPTED by the eviction of A');

    // Window 3: A deployed again on demand; the operator evicts it while pre-5 runs and the user cancels pre-5 at
    // the same moment (the requeue and the cancel race on one request).
    await ws.until((ms) => ms.some((m) => m.requestId === 'pre-5' && m.status === 'LOG'), 'pre-5 running', 30_000);
    const [evictedAgain, cancelled5] = await Promise.all([evict(f, { model: A }), cancel(f, 'pre-5')]);
    assert.equal(evictedAgain.status, 202, JSON.stringify(evictedAgain.body));
    assert.equal(cancelled5.status, 200, JSON.stringify(cancelled5.body));

    const final = await Promise.all(ids.map((id) => requestIn(f, id, ['COMPLETED', 'ERROR', 'CANCELLED'], 45_000)));
    log(final.map((v, i) => `${ids[i]} ${String(v.status)}${v.error ? ` ${JSON.stringify(v.error)}` : ''}`).join(', '));
    assert.deepEqual(
      final.map((v) => v.status),
      ['COMPLETED', 'COMPLETED', 'CANCELLED', 'CANCELLED', 'CANCELLED', 'COMPLETED'],
    );
    await until(
      'the websocket has every end',
      async () =>
        ids.every((id) => ws.messages.some((m) => m.type === 'ended' && m.requestId === id)) ? true : undefined,
      5000,
    );
    for (const id of ids) {
      const ends = ws.statuses(id).filter((m) => ['COMPLETED', 'ERROR', 'CANCELLED'].includes(String(m.status)));
      assert.equal(ends.length, 1, `${id}: one end on the websocket`);
    }

    const { store, close } = await f.openStore();
    try {
      const all = await readLog(store);
      const types = all.map((e) => e.type);
      const demoted = all
        .filter((e) => e.type === 'ReplicaDemoted')
        .map((e) => data<{ replicaId: string }>(e).replicaId);
      log(
        `demoted: ${demoted.join(', ')}; restored: ${all
          .filter((e) => e.type === 'ReplicaRestored')
          .map((e) => data<{ replicaId: string }>(e).replicaId)
          .join(', ')}`,
      );
      assert.ok(demoted.includes(`${A}#1`), 'A was demoted to WARM');
      assert.ok(types.includes('ReplicaEvictionRequested'), 'A was evicted');
      for (const id of ids) {
        const stream = requestStream(all, id);
        const t = stream.map((e) => e.type);
        const cancelAt = stream.find((e) => e.type === 'RequestCancelled');
        if (cancelAt !== undefined) {
          assert.ok(
            !stream.some((e) => e.type === 'RequestDispatched' && e.position > cancelAt.position),
            `${id}: no dispatch after the cancel (${t.join(' ')})`,
          );
          assert.ok(!t.includes('RequestCompleted'), `${id} never completed`);
        } else {
          assert.equal(
            t.filter((x) => x === 'RequestCompleted').length,
            1,
            `${id}: one RequestCompleted (${t.join(' ')})`,
          );
        }
        assert.ok(!t.includes('RequestFailed'), `${id} never failed`);
        for (const r of stream.filter((e) => e.type === 'RequestRequeued'))
          assert.equal(data<{ reason: string }>(r).reason, 'PREEMPTED');
      }
      for (const id of ['pre-3', 'pre-4'])
        assert.ok(
          !requestStream(all, id).some((e) => e.type === 'RequestDispatched'),
          `${id}, cancelled while queued, never ran`,
        );
      for (const id of ['pre-1', 'pre-2']) {
        assert.ok(
          requestStream(all, id).some((e) => e.type === 'RequestRequeued'),
          `${id} was requeued, then completed`,
        );
      }
      log(
        `pre-5: ${requestStream(all, 'pre-5')
          .map((e) => e.type)
          .join(' ')}`,
      );
    } finally {
      await close();
    }
  } finally {
    await ws.close();
  }
}
