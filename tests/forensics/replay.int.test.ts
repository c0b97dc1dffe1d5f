// Replay: the state rebuilt in a throwaway SQLite store by the real projection runner, as of a position or a time,
// equals a fold of exactly that prefix of the log; the source store is only read; the folder goes away; bad targets
// are refused. Over the recorded eviction-storm log.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isFabricError } from '../../protocol/errors.js';
import type { StoredEvent } from '../../eventstore/port.js';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { controlPlaneToSnapshot, foldControlPlane } from '../../projections/control-plane/state.js';
import {
  diffReplays,
  renderReplay,
  renderReplayDiff,
  replayState,
  replayTo,
  resolveReplayTarget,
} from '../../forensics/index.js';
import { fixtureStore } from './fixture-store.js';

let store: SqliteEventStore;
let log: StoredEvent[];
let tmpRoot: string;

before(async () => {
  ({ store, events: log } = await fixtureStore('eviction-storm'));
  tmpRoot = mkdtempSync(join(tmpdir(), 'ndif-replay-test-'));
});
after(async () => {
  await store.close();
  rmSync(tmpRoot, { recursive: true, force: true });
});

const canonical = (s: Parameters<typeof controlPlaneToSnapshot>[0]) => JSON.stringify(controlPlaneToSnapshot(s));

describe('replay to a position', () => {
  it('equals a fold of the first p events, for p at the start, inside and at the end of the log', async () => {
    const first = log.findIndex((e) => e.type === 'ReplicaDemotionRequested') + 1;
    for (const p of [0, 1, 37, first, first + 1, 150, log.length]) {
      const r = await replayState(store, p, { tmpRoot });
      assert.equal(r.target.position, p);
      assert.equal(r.events, p);
      assert.equal(r.state.position, p);
      assert.equal(canonical(r.state), canonical(foldControlPlane(log.slice(0, p))), `state at position ${p}`);
      assert.equal(r.target.at, p === 0 ? null : log[p - 1].metadata.at);
    }
    assert.deepEqual(readdirSync(tmpRoot), [], 'every throwaway folder was removed');
    assert.equal(await store.headPosition(), log.length, 'the source store is unchanged');
  });

  it('shows the cluster and queues as they were: a replica DEMOTING with its request requeued', async () => {
    const demotion = log.find((e) => e.type === 'ReplicaDemotionRequested')!;
    const victim = (demotion.data as { replicaId: string }).replicaId;
    const r = await replayTo(store, demotion.position, { tmpRoot });
    const replica = r.cluster.deployments.flatMap((d) => d.replicas).find((x) => x.replicaId === victim);
    assert.equal(replica?.state, 'DEMOTING');
    const requeue = log.find((e) => e.type === 'RequestRequeued' && e.position > demotion.position)!;
    const after = await replayTo(store, requeue.position, { tmpRoot });
    const requestId = (requeue.data as { requestId: string }).requestId;
    const q = after.queues.find((x) => x.head.some((e) => e.requestId === requestId));
    assert.ok(q !== undefined, `${requestId} is back in a queue right after its requeue`);
    assert.equal(q.head.find((e) => e.requestId === requestId)?.requeued, true);
    assert.ok(after.requests.totals.requeued >= 1);
    const text = renderReplay(after);
    assert.match(
      text,
      new RegExp(`^replay to position ${requeue.position}: position ${requeue.position} of ${log.length} \\(`),
    );
    for (const section of ['agents', 'gpus', 'deployments', 'queues'])
      assert.match(text, new RegExp(`\\n${section}\\n`));
    assert.match(text, new RegExp(`${requestId} +\\d +(yes +)?yes +20`));
  });

  it('keeps the throwaway store when asked, with the copied prefix in it', async () => {
    const r = await replayTo(store, 20, { tmpRoot, keep: true });
    assert.equal(r.store.kept, true);
    const { SqliteEventStore } = await import('../../eventstore/sqlite/store.js');
    const copy = new SqliteEventStore({ path: r.store.path });
    assert.equal(await copy.headPosition(), 20);
    assert.deepEqual(
      (await copy.readAll({ limit: 20 })).map((e) => [e.id, e.streamId, e.revision, e.position]),
      log.slice(0, 20).map((e) => [e.id, e.streamId, e.revision, e.position]),
    );
    await copy.close();
    rmSync(join(r.store.path, '..'), { recursive: true, force: true });
  });

  it('diffs two points', async () => {
    const demotion = log.find((e) => e.type === 'ReplicaDemotionRequested')!;
    const a = await replayTo(store, demotion.position - 1, { tmpRoot });
    const b = await replayTo(store, demotion.position, { tmpRoot });
    const d = diffReplays(a, b);
    const victim = (demotion.data as { replicaId: string }).replicaId;
    assert.deepEqual(d.replicas, [
      {
        replicaId: victim,
        modelKey: victim.split('#')[0],
        from: 'HOT',
        to: 'DEMOTING',
        fromAgent: 'a1',
        toAgent: 'a1',
      },
    ]);
    assert.deepEqual(d.agents, []);
    assert.match(renderReplayDiff(d), new RegExp(`${victim} +HOT → DEMOTING`));
  });
});

describe('replay to a time', () => {
  it('includes every event up to the first one recorded after that time', async () => {
    // A time between two events: the last event at or before it is included, the next is not.
    const i = log.findIndex((e, k) => k > 30 && Date.parse(log[k + 1]?.metadata.at ?? '') > Date.parse(e.metadata.at));
    const t = new Date(Date.parse(log[i].metadata.at) + 1).toISOString();
    assert.ok(Date.parse(log[i + 1].metadata.at) > Date.parse(t) || log[i + 1].metadata.at === t);
    const expected = log.filter((e) => Date.parse(e.metadata.at) <= Date.parse(t));
    const r = await replayState(store, t, { tmpRoot });
    assert.equal(r.target.kind, 'time');
    assert.equal(r.target.position, expected.length);
    assert.equal(canonical(r.state), canonical(foldControlPlane(log.slice(0, expected.length))));
    // Exactly at an event's time: every event of that millisecond is in.
    const at = log[i].metadata.at;
    assert.equal(
      (await resolveReplayTarget(store, at)).position,
      log.filter((e) => Date.parse(e.metadata.at) <= Date.parse(at)).length,
    );
  });

  it('before the first event is the empty log; after the last is the whole log', async () => {
    assert.equal((await resolveReplayTarget(store, '2000-01-01T00:00:00Z')).position, 0);
    assert.equal((await resolveReplayTarget(store, '2099-01-01T00:00:00.000Z')).position, log.length);
  });
});

describe('replay refusals', () => {
  const code = async (to: unknown, opts = {}) => {
    try {
      await replayTo(store, to, { tmpRoot, ...opts });
      return 'answered';
    } catch (e) {
      assert.ok(isFabricError(e));
      return `${e.code}:${e.httpStatus}`;
    }
  };
  it('refuses targets that are neither a position nor a UTC time, positions past the head, and replays over the limit', async () => {
    assert.equal(await code('yesterday'), 'REPLAY_BAD_TARGET:400');
    assert.equal(await code(-1), 'REPLAY_BAD_TARGET:400');
    assert.equal(await code('1.5'), 'REPLAY_BAD_TARGET:400');
    assert.equal(await code('2025-03-03 08:00:00'), 'REPLAY_BAD_TARGET:400');
    assert.equal(await code('2025-03-03T08:00:00+01:00'), 'REPLAY_BAD_TARGET:400');
    assert.equal(await code(log.length + 1), 'REPLAY_BEYOND_HEAD:400');
    assert.equal(await code(100, { maxEvents: 99 }), 'REPLAY_TOO_LARGE:413');
    assert.deepEqual(readdirSync(tmpRoot), [], 'a refused replay leaves nothing behind');
  });
});
