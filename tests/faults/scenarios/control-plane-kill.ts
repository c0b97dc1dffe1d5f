// kill -9 of the process that acknowledges commands, in the middle of a burst of HTTP submits from concurrent
// clients. After a restart over the same store: every submit answered 2xx is there (its submission at the log position its
// answer gave), nothing is stored twice (event ids, stream revisions, one RequestReceived per request, also after
// every client retried every id it had sent), and the control-plane projection the restarted process kept live
// (from its snapshot plus what came after) equals a fresh fold of the whole log.
import assert from 'node:assert/strict';
import type { EventStore, StoredEvent } from '../../../eventstore/port.js';
import {
  controlPlaneToSnapshot,
  foldControlPlane,
  CONTROL_PLANE_PROJECTION_VERSION,
} from '../../../projections/control-plane/state.js';
import { readLog, type FaultFabric } from '../fabric.js';
import { QUICK_BLOCK, call, getRequest, requestIn, until } from '../http.js';

export interface BurstOutcome {
  acked: Map<string, number>;
  /** Sent, but no 2xx answer came (the process died first, or the answer was lost). */
  unanswered: Set<string>;
}

const body = (requestId: string) => ({
  requestId,
  model: 'gpt2-tiny',
  invokes: [{ input: `burst ${requestId}`, block: QUICK_BLOCK }],
});

/** `clients` concurrent clients submit until `killAfterAcks` submits were acknowledged, then the kill. */
async function burstAndKill(f: FaultFabric, clients: number, killAfterAcks: number): Promise<BurstOutcome> {
  const acked = new Map<string, number>();
  const unanswered = new Set<string>();
  let killing: Promise<void> | undefined;
  const url = f.commandUrl;
  const client = async (c: number) => {
    for (let i = 0; ; i++) {
      const id = `burst-${c}-${i}`;
      unanswered.add(id);
      try {
        const r = await call(url, '/requests', { body: body(id), headers: f.operatorHeaders });
        if (r.status === 202) {
          acked.set(id, Number(r.body.logPosition));
          unanswered.delete(id);
        } else throw new Error(`submit ${id}: ${r.status} ${JSON.stringify(r.body)}`);
      } catch (e) {
        if (killing !== undefined) return; // the process is gone: this client stops
        throw e;
      }
      if (acked.size >= killAfterAcks) killing ??= f.killControlPlane();
      if (killing !== undefined) {
        await killing;
        return;
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  await killing;
  return { acked, unanswered };
}

function assertNoDuplicates(log: StoredEvent[]): void {
  const ids = new Set<string>();
  const revisions = new Map<string, number>();
  log.forEach((e, i) => {
    assert.ok(!ids.has(e.id), `event id ${e.id} stored twice`);
    ids.add(e.id);
    assert.equal(e.position, i + 1, 'positions are 1, 2, 3… without gaps');
    const next = revisions.get(e.streamId) ?? 0;
    assert.equal(e.revision, next, `${e.streamId}: revision ${e.revision} follows ${next - 1}`);
    revisions.set(e.streamId, next + 1);
  });
  const received = new Map<string, number>();
  for (const e of log) if (e.type === 'RequestReceived') received.set(e.streamId, (received.get(e.streamId) ?? 0) + 1);
  for (const [stream, n] of received) assert.equal(n, 1, `${stream}: ${n} RequestReceived`);
}

export async function controlPlaneKillDuringBurst(
  f: FaultFabric,
  opts: {
    snapshots: (store: EventStore) => Promise<{ position: number; version: number; snapshot?: unknown } | undefined>;
    /** Checks of the caller's, once the control plane is back. */
    afterRestart?: () => Promise<void>;
  },
  say: (s: string) => void = () => undefined,
): Promise<void> {
  const t0 = Date.now();
  const log = (s: string) => say(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${s}`);
  // A first life that ends cleanly: its projection snapshot is where the restarted process resumes from.
  for (const id of ['before-1', 'before-2', 'before-3'])
    assert.equal((await call(f.commandUrl, '/requests', { body: body(id), headers: f.operatorHeaders })).status, 202);
  await Promise.all(['before-1', 'before-2', 'before-3'].map((id) => requestIn(f, id, ['COMPLETED'])));
  await f.restartControlPlaneCleanly();
  log('first life over');

  const { acked, unanswered } = await burstAndKill(f, 8, 150);
  log(`acknowledged ${acked.size} submits, ${unanswered.size} sent without an answer; then kill -9`);
  assert.ok(acked.size >= 150);

  await f.restartControlPlane();
  log('restarted');
  await opts.afterRestart?.();
  // Every acknowledged submit is there, at the position its answer gave.
  for (const id of acked.keys()) assert.equal((await getRequest(f, id)).status, 200, `${id} was acknowledged`);
  {
    const { store, close } = await f.openStore();
    try {
      const all = await readLog(store);
      assertNoDuplicates(all);
      const at = new Map(
        all
          .filter((e) => e.type === 'RequestReceived')
          .map((e) => [String((e.data as { requestId: string }).requestId), e.position]),
      );
      // logPosition is the position of the submission's last event (RequestReceived and RequestQueued are one append).
      for (const [id, position] of acked) {
        assert.ok(at.has(id), `${id} was acknowledged and is stored`);
        assert.equal(
          all[position - 1]?.streamId,
          `request-${id}`,
          `${id}: the acknowledged position is its submission`,
        );
        assert.ok(at.get(id)! <= position);
      }
      const storedUnanswered = [...unanswered].filter((id) => at.has(id));
      log(`${storedUnanswered.length} of the ${unanswered.size} unanswered submits were stored before the kill`);
    } finally {
      await close();
    }
  }

  // Clients retry everything they sent: the acknowledged ones (and the unanswered ones that were stored) are
  // recognised as the same submission; the rest are stored now.
  let existing = 0;
  for (const id of [...acked.keys(), ...unanswered]) {
    const r = await call(f.commandUrl, '/requests', { body: body(id), headers: f.operatorHeaders });
    assert.ok(r.status === 200 || r.status === 202, `${id}: ${r.status} ${JSON.stringify(r.body)}`);
    if (acked.has(id)) assert.equal(r.status, 200, `${id} was already stored`);
    if (r.body.existing === true) existing++;
  }
  log(`retries: ${existing} recognised as already stored`);
  const everyId = [...acked.keys(), ...unanswered];
  await until(
    'every burst request finished',
    async () => {
      const q = await call(f.queryUrl, '/requests?limit=500', { headers: f.operatorHeaders });
      const open = (q.body.requests as Array<{ status: string }>).filter(
        (r) => !['COMPLETED', 'ERROR', 'CANCELLED'].includes(r.status),
      );
      return open.length === 0 ? true : undefined;
    },
    60_000,
    200,
  );
  for (const id of everyId) {
    const v = (await getRequest(f, id)).body;
    assert.equal(v.status, 'COMPLETED', `${id}: ${JSON.stringify(v.error ?? null)}`);
  }
  log('every request completed');

  // A clean stop saves the live projection as a snapshot: it equals a fresh fold of the log.
  await f.stop();
  const { store, close } = await f.openStore();
  try {
    const all = await readLog(store);
    assertNoDuplicates(all);
    const cp = await opts.snapshots(store);
    assert.ok(cp !== undefined, 'the projection saved its snapshot');
    assert.equal(cp.version, CONTROL_PLANE_PROJECTION_VERSION);
    assert.equal(cp.position, all.at(-1)!.position, 'the snapshot is at the head');
    const fresh = JSON.stringify(controlPlaneToSnapshot(foldControlPlane(all)));
    assert.equal(JSON.stringify(cp.snapshot), fresh, 'the live projection equals a fresh rebuild from the log');
    log(`${all.length} events; projection snapshot at ${cp.position} equals a fresh fold`);
  } finally {
    await close();
  }
}
