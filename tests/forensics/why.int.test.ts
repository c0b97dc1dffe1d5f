// `why` over a scripted make-room on the real control plane (SQLite store, scheduler, scripted agent): the requeue of
// ra is explained by the demotion (or eviction) of a#1 with its numbers, which is explained by c#1 needing room,
// which was requested for rc; the replica's own answer lists what its demotion caused. Also agents, bad ids, text.
import { DEFAULT_CONCURRENCY } from '../../domain/deployment/settings.js';
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { isFabricError } from '../../protocol/errors.js';
import { explainWhy, renderWhy, type CauseLink, type WhyReport, type WhyStep } from '../../forensics/index.js';
import type { GoldenHarness } from '../golden/harness.js';
import { HOUR, makeRoomScenario } from './make-room.js';

const open: GoldenHarness[] = [];
after(async () => {
  for (const h of open) await h.close();
});

async function scenario(ramGib?: number): Promise<GoldenHarness> {
  const h = await makeRoomScenario({ ramGib });
  open.push(h);
  return h;
}

const step = (r: WhyReport, type: string, nth = 0): WhyStep => {
  const s = r.steps.filter((x) => x.type === type)[nth];
  assert.ok(s !== undefined, `no ${type} #${nth} in ${r.steps.map((x) => x.type).join(', ')}`);
  return s;
};
const eventCause = (c: CauseLink | undefined) => {
  assert.equal(c?.kind, 'event');
  return c as Extract<CauseLink, { kind: 'event' }>;
};

describe('why: a make-room demotion and the requeue it caused', async () => {
  const h = await scenario();
  const ra = await explainWhy(h.store, 'ra');

  it('lists the request stream in order, with who decided each step', () => {
    assert.deepEqual(ra.subject, { kind: 'request', id: 'ra', streamId: 'request-ra' });
    assert.deepEqual(
      ra.steps.map((s) => `${s.type}:${s.decidedBy}`),
      [
        'RequestReceived:api-key',
        'RequestQueued:api-key',
        'RequestDispatched:scheduler',
        'RequestStarted:agent',
        'RequestLogged:agent',
        'RequestRequeued:scheduler',
        'RequestDispatched:scheduler',
        'RequestStarted:agent',
        'RequestLogged:agent',
        'RequestCompleted:agent',
      ],
    );
    assert.ok(ra.steps.every((s, i) => i === 0 || s.position > ra.steps[i - 1].position));
    assert.equal(step(ra, 'RequestReceived').actor, 'key:alice');
    assert.deepEqual(step(ra, 'RequestReceived').causes, [
      { kind: 'command', commandId: 'make-room:cmd-3', actor: 'key:alice', at: '2025-03-03T10:00:00.000Z' },
    ]);
  });

  it('gives the queue position at enqueue (derived from the log) and the dispatch decision with its numbers', () => {
    assert.deepEqual(step(ra, 'RequestQueued').derived, { queuePosition: 0, queueLength: 1 });
    const d = step(ra, 'RequestDispatched');
    assert.equal(d.rule, 'dispatch-queue-head');
    assert.deepEqual(d.numbers, {
      attempt: 1,
      position: 0,
      queueLength: 1,
      rank: 3,
      replicaInFlight: 0,
      concurrency: DEFAULT_CONCURRENCY,
      replicasWithRoom: 1,
    });
    assert.deepEqual(d.causes, [
      {
        kind: 'step',
        position: step(ra, 'RequestQueued').position,
        eventId: step(ra, 'RequestQueued').eventId,
        type: 'RequestQueued',
      },
    ]);
  });

  it('explains the requeue: replica a#1 demoted to make room for c#1, with the bytes, ages and minimum time', () => {
    const rq = step(ra, 'RequestRequeued');
    assert.equal(rq.actor, 'system:scheduler');
    assert.equal(rq.rule, 'requeue-interrupted');
    assert.match(
      rq.summary,
      /^requeued because replica a#1 was being demoted to the CPU cache \(PREEMPTED\); attempt 1 was interrupted, the next is attempt 2; back at rank 2/,
    );
    assert.equal(rq.numbers.attempt, 1);
    assert.equal(rq.numbers.nextAttempt, 2);
    assert.deepEqual(rq.derived, { queuePosition: 0, queueLength: 1 });
    const demotion = eventCause(rq.causes[0]);
    assert.equal(demotion.type, 'ReplicaDemotionRequested');
    assert.equal(demotion.streamId, 'deployment-a');
    assert.equal(demotion.rule, 'make-room-demote');
    assert.equal(demotion.actor, 'system:scheduler');
    const n = demotion.numbers;
    assert.deepEqual(
      [n.bytesPerGpu, n.gpuFreeBytes, n.victimBytes, n.victimAgeMs],
      [12 * GIB, 8 * GIB, 8 * GIB, 2 * HOUR],
    );
    assert.deepEqual(demotion.derived, {
      victimMinDeploymentMs: HOUR,
      victimWeightsBytes: 4 * GIB,
      victimPinned: false,
      victimOlderThanMinimum: true,
    });
    assert.equal(
      demotion.summary,
      'demoted to make room: c (c#1) needed 12.00 GiB (12884901888 B) on GPU 0 of agent a1, which had 8.00 GiB free; a#1 (8.00 GiB) was the smallest ' +
        'unpinned replica there older than its minimum deployment time (age 7200 s ≥ minimum 3600 s); kept WARM in the CPU cache (0 B of 57.60 GiB in use)',
    );
    const requested = eventCause(rq.causes[1]);
    assert.deepEqual([requested.type, requested.streamId], ['ReplicaRequested', 'deployment-c']);
    assert.match(requested.summary, /^replica c#1 requested \(ON_DEMAND\)/);
    const queued = eventCause(rq.causes[2]);
    assert.deepEqual([queued.type, queued.streamId, queued.actor], ['RequestQueued', 'request-rc', 'key:alice']);
    assert.equal(rq.causes[3].kind, 'command');
    assert.equal(rq.causes.length, 4);
    assert.equal(rq.causationId, demotion.eventId, 'the requeue names the demotion as its cause');
  });

  it('the second attempt runs and completes; the answer never re-decides anything (same answer twice)', async () => {
    assert.equal(step(ra, 'RequestDispatched', 1).numbers.attempt, 2);
    assert.equal(step(ra, 'RequestCompleted').numbers.attempt, 2);
    assert.deepEqual(await explainWhy(h.store, 'ra'), ra);
  });

  it('why a#1 shows its life and what its demotion caused (the requeue of ra)', async () => {
    const a1 = await explainWhy(h.store, 'a#1');
    assert.equal(a1.subject.kind, 'replica');
    assert.deepEqual(a1.steps.map((s) => s.type).slice(0, 7), [
      'DeploymentRequested',
      'ReplicaRequested',
      'ReplicaPlaced',
      'ReplicaLoading',
      'ReplicaHot',
      'ReplicaDemotionRequested',
      'ReplicaDemoted',
    ]);
    assert.ok(
      a1.steps.some((s) => s.type === 'ReplicaRestored'),
      'a#1 came back from the CPU cache for a#2',
    );
    const demotion = step(a1, 'ReplicaDemotionRequested');
    assert.deepEqual(
      demotion.effects.map((e) => `${e.type}:${e.streamId}`).filter((x) => x.startsWith('RequestRequeued')),
      ['RequestRequeued:request-ra'],
    );
    assert.equal(step(a1, 'ReplicaPlaced').numbers.chosenFreeBytes, 24 * GIB);
  });

  it('renders the chain for people', () => {
    const text = renderWhy(ra);
    assert.match(text, /^why request ra: 10 step\(s\) from request-ra/);
    assert.match(
      text,
      /RequestRequeued {2}\[requeue-interrupted\]\n {4}requeued because replica a#1 was being demoted/,
    );
    assert.match(
      text,
      /← #\d+ {2}2025-03-03T10:00:00.000Z {2}system:scheduler {2}ReplicaDemotionRequested {2}\[make-room-demote\] {2}\(deployment-a\)/,
    );
    assert.match(
      text,
      /derived from the log: victimMinDeploymentMs=3600000 victimWeightsBytes=4294967296 victimPinned=false victimOlderThanMinimum=true/,
    );
    assert.match(text, /← command make-room:cmd-4 by key:alice/);
  });
});

describe('why: a make-room eviction (the CPU cache is too small to keep the victim WARM)', async () => {
  const h = await scenario(4);

  it('says the victim was removed and why, and the requeue says evicted', async () => {
    const a1 = await explainWhy(h.store, 'a#1');
    const ev = step(a1, 'ReplicaEvictionRequested');
    assert.equal(ev.rule, 'make-room-evict');
    assert.match(
      ev.summary,
      /^evicted to make room: c \(c#1\) needed 12\.00 GiB \(12884901888 B\) on GPU 0 of agent a1, which had 8\.00 GiB free; a#1 \(8\.00 GiB\) was the smallest unpinned replica there older than its minimum deployment time \(age 7200 s ≥ minimum 3600 s\); removed: the CPU cache had 3\.60 GiB free, not enough to keep its 4\.00 GiB of weights WARM$/,
    );
    assert.equal(ev.numbers.cacheBudgetBytes, Math.floor(0.9 * 4 * GIB));
    assert.ok(ev.effects.some((e) => e.type === 'RequestRequeued' && e.streamId === 'request-ra'));
    const removed = step(a1, 'ReplicaRemoved');
    assert.equal(removed.rule, 'eviction-complete');
    assert.equal(removed.causes[0].kind, 'step');
    const ra = await explainWhy(h.store, 'ra', { queuePositions: false });
    assert.match(step(ra, 'RequestRequeued').summary, /^requeued because replica a#1 was being evicted \(PREEMPTED\)/);
    assert.deepEqual(step(ra, 'RequestQueued').derived, {}, 'no queue fold when asked not to');
  });

  it('why an agent: its registration and what followed from it', async () => {
    const agent = await explainWhy(h.store, 'a1');
    assert.equal(agent.subject.kind, 'agent');
    assert.equal(agent.steps[0].type, 'AgentRegistered');
    assert.match(
      agent.steps[0].summary,
      /^agent a1 registered boot a1-boot-1 with GPU\(s\) 0: 24\.00 GiB, RAM 4\.00 GiB, CPU cache budget 3\.60 GiB$/,
    );
  });

  it('refuses ids that are not ids, and says when nothing is known', async () => {
    const code = async (id: string, kind?: 'request' | 'replica' | 'agent') => {
      try {
        await explainWhy(h.store, id, kind === undefined ? {} : { kind });
        return 'answered';
      } catch (e) {
        assert.ok(isFabricError(e));
        return `${e.code}:${e.httpStatus}`;
      }
    };
    assert.equal(await code('nope'), 'WHY_NOT_FOUND:404');
    assert.equal(await code('a#9'), 'WHY_NOT_FOUND:404');
    assert.equal(await code('zzz#1'), 'WHY_NOT_FOUND:404');
    assert.equal(await code('has space'), 'WHY_BAD_ID:400');
    assert.equal(await code(''), 'WHY_BAD_ID:400');
    assert.equal(await code('ra', 'replica'), 'WHY_BAD_ID:400');
    assert.equal(await code('a1', 'request'), 'WHY_NOT_FOUND:404');
  });
});
