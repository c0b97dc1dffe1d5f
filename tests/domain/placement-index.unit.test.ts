// The capacity index and the indexed evaluator against the whole-cluster evaluator: on random clusters the
// indexed choice is the same wherever a replica fits now or after memory being released; eviction plans come from
// the top candidates only (a valid FULL plan, never a fit the whole evaluation would not make); clusters of up to 8
// agents are evaluated whole, candidate for candidate.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CapacityIndex } from '../../domain/placement/capacity-index.js';
import { evaluatePlacement } from '../../domain/placement/evaluate.js';
import { evaluateIndexed } from '../../domain/placement/evaluate-indexed.js';
import { GIB } from '../../domain/placement/size.js';
import type { AgentCapacity, ReplicaAllocation, ReplicaStateName } from '../../domain/placement/types.js';

const HOUR = 3_600_000;
const NOW = 10 * HOUR;

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomCluster(seed: number, agents: number, dense = false): AgentCapacity[] {
  const r = rng(seed);
  const out: AgentCapacity[] = [];
  let n = 0;
  for (let a = 0; a < agents; a++) {
    const gpus = Array.from({ length: 8 }, (_, index) => ({ index, memoryBytes: 80 * GIB }));
    const used = gpus.map(() => 0);
    const replicas: ReplicaAllocation[] = [];
    const count = dense ? 64 : Math.floor(r() * 14);
    for (let k = 0; k < count; k++) {
      // Dense: each GPU in turn, until it is nearly full.
      const g = dense ? k % 8 : Math.floor(r() * 8);
      const gib = 2 + Math.floor(r() * 40);
      if (used[g] + gib > 80) continue;
      used[g] += gib;
      const x = r();
      const state: ReplicaStateName = dense
        ? 'HOT'
        : x < 0.05
          ? 'UNLOADING'
          : x < 0.1
            ? 'DEMOTING'
            : x < 0.15
              ? 'WARM'
              : 'HOT';
      replicas.push({
        replicaId: `m${Math.floor(r() * 12)}#${++n}`,
        modelKey: '',
        state,
        gpus: state === 'WARM' ? [] : [g],
        bytesPerGpu: state === 'WARM' ? 0 : gib * GIB,
        sizeBytes: gib * GIB,
        weightsBytes: Math.round(gib * GIB * 0.8),
        pinned: r() < 0.1,
        placedAtMs: NOW - (r() < 0.2 ? 0.5 : 2) * HOUR,
        minDeploymentMs: HOUR,
      });
    }
    for (const x of replicas) (x as { modelKey: string }).modelKey = x.replicaId.split('#')[0];
    out.push({
      agentId: `agent-${String(a).padStart(3, '0')}`,
      state: r() < 0.05 ? 'UNRESPONSIVE' : 'ACTIVE',
      gpus,
      cpuCacheBudgetBytes: 100 * GIB,
      replicas,
    });
  }
  return out;
}

function indexOf(agents: AgentCapacity[]): CapacityIndex {
  const index = new CapacityIndex();
  for (const a of agents) index.setAgent(a.agentId, a.state, a.gpus, a.cpuCacheBudgetBytes);
  for (const a of agents) for (const x of a.replicas) index.setReplica(x.replicaId, a.agentId, x);
  return index;
}

describe('capacity index', () => {
  it('answers every agent as it was given, and forgets a replica removed', () => {
    const agents = randomCluster(1, 20);
    const index = indexOf(agents);
    for (const a of agents) assert.deepEqual(index.capacity(a.agentId), a);
    const a = agents.find((x) => x.state === 'ACTIVE' && x.replicas.some((r) => r.state === 'HOT'))!;
    const victim = a.replicas.find((r) => r.state === 'HOT')!;
    index.setReplica(victim.replicaId, null, null);
    assert.deepEqual(
      index.capacity(a.agentId)!.replicas.map((r) => r.replicaId),
      a.replicas.filter((r) => r !== victim).map((r) => r.replicaId),
    );
    const free = index
      .gpusWithFree(0, 0, 10_000)
      .find((g) => g.gpu.agentId === a.agentId && g.gpu.index === victim.gpus[0]);
    const held = a.replicas
      .filter((r) => r !== victim && r.state !== 'WARM' && r.gpus[0] === victim.gpus[0])
      .reduce((s, r) => s + r.bytesPerGpu, 0);
    assert.equal(free?.free, 80 * GIB - held);
  });

  it('lists only the GPUs of ACTIVE agents', () => {
    const agents = randomCluster(2, 30);
    const index = indexOf(agents);
    const active = new Set(agents.filter((a) => a.state === 'ACTIVE').map((a) => a.agentId));
    const listed = index.gpusWithFree(0, 0, 10_000);
    assert.equal(listed.length, active.size * 8);
    assert.ok(listed.every((g) => active.has(g.gpu.agentId)));
    assert.equal(index.activeAgents, active.size);
  });
});

describe('indexed placement', () => {
  it('chooses as the whole-cluster evaluation wherever the replica fits now or after a release', () => {
    let compared = 0;
    let full = 0;
    for (let seed = 10; seed < 50; seed++) {
      const agents = randomCluster(seed, 60, seed >= 40);
      const index = indexOf(agents);
      const r = rng(seed * 7);
      for (let k = 0; k < 20; k++) {
        const request = {
          modelKey: `m${Math.floor(r() * 12)}`,
          sizeBytes: Math.round((seed >= 40 ? 40 + r() * 38 : 4 + r() * 120) * GIB),
          gpus: seed < 40 && r() < 0.25 ? 2 : 1,
          nowMs: NOW,
          force: false,
        };
        const whole = evaluatePlacement(agents, request).best;
        const indexed = evaluateIndexed(index, request).best;
        if (whole === undefined) {
          assert.equal(indexed, undefined);
          continue;
        }
        if (whole.level === 'FULL' || whole.level === 'CACHED_AND_FULL') {
          full++;
          if (indexed !== undefined) {
            assert.equal(indexed.level, whole.level === 'CACHED_AND_FULL' ? indexed.level : 'FULL');
            assert.ok(indexed.victims.length > 0);
          }
          continue;
        }
        compared++;
        assert.deepEqual(
          indexed && {
            agentId: indexed.agentId,
            gpus: indexed.gpus,
            level: indexed.level,
            waits: indexed.waitsForRelease,
          },
          { agentId: whole.agentId, gpus: whole.gpus, level: whole.level, waits: whole.waitsForRelease },
          `seed ${seed}, request ${JSON.stringify(request)}`,
        );
      }
    }
    assert.ok(compared > 300, `only ${compared} decisions compared`);
    assert.ok(full > 0, 'no decision needed evictions');
  });

  it('evaluates a cluster of up to 8 agents whole, candidate for candidate', () => {
    const agents = randomCluster(3, 8);
    const request = { modelKey: 'm1', sizeBytes: 30 * GIB, gpus: 1, nowMs: NOW, force: false };
    const indexed = evaluateIndexed(indexOf(agents), request);
    assert.deepEqual(indexed.candidates, evaluatePlacement(agents, request).candidates);
    assert.deepEqual(indexed.notEvaluated, { notActive: 0, ranked: 0 });
  });

  it('at 1,000 agents evaluates a handful and counts the rest', () => {
    const agents = randomCluster(4, 1000);
    const request = { modelKey: 'm1', sizeBytes: 30 * GIB, gpus: 1, nowMs: NOW, force: false };
    const e = evaluateIndexed(indexOf(agents), request);
    assert.ok(e.best !== undefined);
    assert.ok(e.candidates.length < 50, `${e.candidates.length} agents evaluated`);
    assert.equal(e.candidates.length + e.notEvaluated.notActive + e.notEvaluated.ranked, 1000);
    assert.equal(e.best.agentId, evaluatePlacement(agents, request).best!.agentId);
  });
});
