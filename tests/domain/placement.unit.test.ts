// Placement evaluator tables: levels, best fit, multi-GPU, eviction plans, refusals with numbers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { evaluatePlacement } from '../../domain/placement/evaluate.js';
import { GIB, MIB, modelSizeBytes } from '../../domain/placement/size.js';
import type { AgentCapacity, ReplicaAllocation } from '../../domain/placement/types.js';

const HOUR = 3_600_000;
const NOW = 10 * HOUR;

function rep(replicaId: string, gpus: number[], gib: number, over: Partial<ReplicaAllocation> = {}): ReplicaAllocation {
  return {
    replicaId,
    modelKey: replicaId.split('#')[0],
    state: 'HOT',
    gpus,
    bytesPerGpu: gib * GIB,
    sizeBytes: gib * GIB * gpus.length,
    weightsBytes: Math.round(gib * GIB * 0.8),
    pinned: false,
    placedAtMs: NOW - 2 * HOUR,
    minDeploymentMs: HOUR,
    ...over,
  };
}

function agent(
  agentId: string,
  gpuGib: number[],
  replicas: ReplicaAllocation[] = [],
  over: Partial<AgentCapacity> = {},
): AgentCapacity {
  return {
    agentId,
    state: 'ACTIVE',
    gpus: gpuGib.map((g, index) => ({ index, memoryBytes: g * GIB })),
    cpuCacheBudgetBytes: 100 * GIB,
    replicas,
    ...over,
  };
}

const want = (gib: number, gpus = 1, force = false) => ({
  modelKey: 'new',
  sizeBytes: gib * GIB,
  gpus,
  nowMs: NOW,
  force,
});

describe('placement: model size', () => {
  it('is weights × 1.15 + 500 MiB by default, overridable', () => {
    assert.equal(modelSizeBytes(10 * GIB), Math.ceil(10 * GIB * 1.15) + 500 * MIB);
    assert.equal(modelSizeBytes(10 * GIB, 0.5, 0), 15 * GIB);
  });
});

describe('placement: candidate levels', () => {
  const cases: {
    name: string;
    agents: AgentCapacity[];
    gib: number;
    gpus?: number;
    level: string;
    excluded?: RegExp;
  }[] = [
    { name: 'empty GPU that fits → FREE', agents: [agent('a', [16])], gib: 4, level: 'FREE' },
    {
      name: 'WARM copy on the node and room → CACHED_AND_FREE',
      agents: [agent('a', [16], [rep('new#1', [], 0, { state: 'WARM', gpus: [] })])],
      gib: 4,
      level: 'CACHED_AND_FREE',
    },
    {
      name: 'full, old unpinned replica evictable → FULL',
      agents: [agent('a', [16], [rep('old#1', [0], 14)])],
      gib: 4,
      level: 'FULL',
    },
    {
      name: 'WARM copy, full, evictable → CACHED_AND_FULL',
      agents: [agent('a', [16], [rep('old#1', [0], 14), rep('new#1', [], 0, { state: 'WARM', gpus: [] })])],
      gib: 4,
      level: 'CACHED_AND_FULL',
    },
    {
      name: 'full of a pinned replica → CANT_ACCOMMODATE naming the pinned bytes',
      agents: [agent('a', [16], [rep('old#1', [0], 14, { pinned: true })])],
      gib: 4,
      level: 'CANT_ACCOMMODATE',
      excluded: /14\.00 GiB held by pinned/,
    },
    {
      name: 'full of a young replica → CANT_ACCOMMODATE naming the minimum deployment time',
      agents: [agent('a', [16], [rep('old#1', [0], 14, { placedAtMs: NOW - 60_000 })])],
      gib: 4,
      level: 'CANT_ACCOMMODATE',
      excluded: /younger than their minimum deployment time/,
    },
    {
      name: 'GPU smaller than the model → CANT_ACCOMMODATE',
      agents: [agent('a', [8])],
      gib: 10,
      level: 'CANT_ACCOMMODATE',
      excluded: /only 0 GPU\(s\) are that large/,
    },
    {
      name: 'agent not ACTIVE → CANT_ACCOMMODATE',
      agents: [agent('a', [16], [], { state: 'UNRESPONSIVE' })],
      gib: 4,
      level: 'CANT_ACCOMMODATE',
      excluded: /UNRESPONSIVE/,
    },
    {
      name: 'multi-GPU on an agent with too few GPUs → CANT_ACCOMMODATE',
      agents: [agent('a', [16])],
      gib: 8,
      gpus: 2,
      level: 'CANT_ACCOMMODATE',
      excluded: /has 1 GPU/,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const e = evaluatePlacement(c.agents, want(c.gib, c.gpus ?? 1));
      assert.equal(e.candidates[0].level, c.level);
      if (c.excluded) assert.match(e.candidates[0].excluded ?? '', c.excluded);
    });
  }
  it('a node already running the model is DEPLOYED when asked to ensure it', () => {
    const e = evaluatePlacement([agent('a', [16], [rep('new#1', [0], 4)])], want(4), 'ensure');
    assert.deepEqual([e.candidates[0].level, e.candidates[0].gpus], ['DEPLOYED', [0]]);
  });
  it('levels order the candidates: cached before free before full', () => {
    const e = evaluatePlacement(
      [
        agent('full', [16], [rep('old#1', [0], 14)]),
        agent('free', [16]),
        agent('cached', [16], [rep('new#1', [], 0, { state: 'WARM', gpus: [] })]),
      ],
      want(4),
    );
    assert.deepEqual(
      e.candidates.map((c) => [c.agentId, c.level]),
      [
        ['cached', 'CACHED_AND_FREE'],
        ['free', 'FREE'],
        ['full', 'FULL'],
      ],
    );
  });
});

describe('placement: best fit', () => {
  it('chooses the GPU with the least free memory that fits, on one agent and across agents', () => {
    const one = evaluatePlacement(
      [agent('a', [16, 16, 16], [rep('x#1', [0], 6), rep('y#1', [1], 11), rep('z#1', [2], 13)])],
      want(4),
    );
    assert.deepEqual([one.best?.gpus, one.best?.freeBytes], [[1], 5 * GIB]);
    const across = evaluatePlacement([agent('a', [24]), agent('b', [16], [rep('x#1', [0], 10)])], want(4));
    assert.equal(across.best?.agentId, 'b');
  });
  it('skips GPUs that already hold the model when adding a replica', () => {
    const e = evaluatePlacement([agent('a', [16, 16], [rep('new#1', [0], 4)])], want(4));
    assert.deepEqual(e.best?.gpus, [1]);
  });
  it('places a multi-GPU deployment on one agent, an equal share per GPU, best-fit GPUs', () => {
    const e = evaluatePlacement(
      [agent('a', [16, 16, 16, 16], [rep('x#1', [0], 2), rep('y#1', [1], 10), rep('z#1', [3], 9)])],
      want(12, 2),
    );
    assert.deepEqual([e.best?.level, e.best?.gpus, e.best?.bytesPerGpu], ['FREE', [1, 3], 6 * GIB]);
  });
});

describe('placement: eviction plans', () => {
  it('evicts the smallest old unpinned replicas first, only as many as needed', () => {
    const e = evaluatePlacement(
      [agent('a', [16], [rep('big#1', [0], 8), rep('small#1', [0], 2), rep('mid#1', [0], 4)])],
      want(5),
    );
    assert.equal(e.best?.level, 'FULL');
    assert.deepEqual(
      e.best?.victims.map((v) => v.replicaId),
      ['small#1', 'mid#1'],
    );
  });
  it('never takes pinned or young replicas unless forced', () => {
    const agents = [
      agent(
        'a',
        [16],
        [
          rep('pinned#1', [0], 2, { pinned: true }),
          rep('young#1', [0], 3, { placedAtMs: NOW - 1000 }),
          rep('old#1', [0], 9),
        ],
      ),
    ];
    const e = evaluatePlacement(agents, want(6));
    assert.deepEqual(
      e.best?.victims.map((v) => v.replicaId),
      ['old#1'],
    );
    const tight = evaluatePlacement(agents, want(14));
    assert.equal(tight.best, undefined);
    const forced = evaluatePlacement(agents, want(14, 1, true));
    assert.deepEqual(
      forced.best?.victims.map((v) => v.replicaId),
      ['pinned#1', 'young#1', 'old#1'],
    );
  });
  it('demotes to WARM while the node CPU cache budget allows, then removes', () => {
    const e = evaluatePlacement(
      [agent('a', [16], [rep('a#1', [0], 5), rep('b#1', [0], 6)], { cpuCacheBudgetBytes: 5 * GIB })],
      want(14),
    );
    assert.deepEqual(
      e.best?.victims.map((v) => [v.replicaId, v.action]),
      [
        ['a#1', 'DEMOTE'],
        ['b#1', 'REMOVE'],
      ],
    );
  });
  it('memory already being released is waited for instead of evicting more', () => {
    const e = evaluatePlacement(
      [agent('a', [16], [rep('going#1', [0], 10, { state: 'UNLOADING' }), rep('old#1', [0], 5)])],
      want(8),
    );
    assert.deepEqual([e.best?.level, e.best?.waitsForRelease, e.best?.victims.length], ['FREE', true, 0]);
  });
  it('a refusal carries the numbers: needed, best free, best reachable after evictions', () => {
    const e = evaluatePlacement([agent('a', [16], [rep('p#1', [0], 12, { pinned: true })]), agent('b', [8])], want(10));
    assert.equal(e.best, undefined);
    assert.deepEqual([e.bestGpuFreeBytes, e.evictableBytes], [8 * GIB, 8 * GIB]);
    assert.match(e.candidates.find((c) => c.agentId === 'a')!.excluded!, /needs 10\.00 GiB .* 4\.00 GiB free/);
  });
});
