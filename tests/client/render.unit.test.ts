import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatAge, formatBytes, formatMs, table } from '../../client/cli/output.js';
import { RANK_LEGEND, renderCluster, renderQueue } from '../../client/cli/render.js';
import { replicaStates } from '../../client/cli/wait-ready.js';
import type { ClusterReply } from '../../client/sdk/wire.js';

const cluster: ClusterReply = {
  asOf: 42,
  agents: [
    {
      agentId: 'a1',
      state: 'ACTIVE',
      bootId: 'b1',
      gpus: [{ index: 0, name: 'virtual', memoryBytes: 16 * 1024 ** 3 }],
      ramBytes: 8 * 1024 ** 3,
      cpuCacheBudgetBytes: 0,
      restarts: 0,
    },
  ],
  gpus: [
    { agentId: 'a1', index: 0, name: 'virtual', memoryBytes: 16 * 1024 ** 3, usedBytes: 1024 ** 3, replicas: ['m#1'] },
  ],
  deployments: [
    {
      modelKey: 'm',
      phase: 'READY',
      pinned: true,
      settings: {},
      lastFailure: { kind: 'REFUSED', replicaId: 'm#2', text: 'm needs 64 GiB' },
      queueLength: 2,
      replicas: [{ replicaId: 'm#1', state: 'HOT', level: 'HOT', agentId: 'a1', gpus: [0], bytesPerGpu: 1024 ** 3 }],
    },
  ],
  totals: { received: 5, completed: 3, failed: 1, cancelled: 0, requeued: 1 },
};

test('tables pad every column but the last', () => {
  assert.equal(
    table(
      ['A', 'BB', 'C'],
      [
        ['xxx', null, 'last'],
        [1, 22, undefined],
      ],
    ),
    'A    BB  C\nxxx  -   last\n1    22  -',
  );
});

test('sizes, durations and ages', () => {
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(1536), '1.50 KiB');
  assert.equal(formatBytes(16 * 1024 ** 3), '16.0 GiB');
  assert.equal(formatBytes(null), '-');
  assert.equal(formatMs(250), '250 ms');
  assert.equal(formatMs(4200), '4.2 s');
  assert.equal(formatMs(600_000), '10 min');
  assert.equal(formatAge('2025-01-01T00:00:00.000Z', Date.parse('2025-01-01T00:00:05.000Z')), '5.0 s ago');
  assert.equal(formatAge(null, 0), '-');
});

test('the cluster view: agents, GPU memory, deployments with replicas and the latest refusal', () => {
  const text = renderCluster(cluster, 'http://h:1');
  assert.match(
    text,
    /^fabric http:\/\/h:1 · log position 42 · requests: 5 received, 3 completed, 1 failed, 0 cancelled, 1 requeued$/m,
  );
  assert.match(text, /^a1 +ACTIVE +1 +8\.00 GiB +0$/m);
  assert.match(text, /^a1\/0 +virtual +16\.0 GiB +1\.00 GiB +15\.0 GiB +m#1$/m);
  assert.match(text, /^m +READY +yes +2 +m#1 HOT \(a1 GPU 0\)$/m);
  assert.match(text, /^ {2}m: last refusal \(m#2\): m needs 64 GiB$/m);
  assert.match(
    renderCluster({ ...cluster, agents: [], gpus: [], deployments: [] }, 'u'),
    /no agents registered[\s\S]*no deployments/,
  );
});

test('queues in serving order', () => {
  const now = Date.parse('2025-01-01T00:01:00.000Z');
  const text = renderQueue(
    {
      asOf: 1,
      queues: [
        {
          model: 'm',
          length: 2,
          entries: [
            {
              position: 0,
              requestId: 'r1',
              submitter: 'key:aaaa',
              rank: 1,
              priority: true,
              requeued: false,
              enqueuedAt: '2025-01-01T00:00:00.000Z',
            },
            {
              position: 1,
              requestId: 'r2',
              submitter: 'key:bbbb',
              rank: 3,
              priority: false,
              requeued: false,
              enqueuedAt: '2025-01-01T00:00:30.000Z',
            },
          ],
        },
        { model: 'empty', length: 0, entries: [] },
      ],
    },
    now,
  );
  assert.equal(
    text,
    `m: 2 waiting\nPOS  REQUEST  SUBMITTER  RANK  PRIORITY  REQUEUED  WAITING\n0    r1       key:aaaa   1     yes       no        60 s\n1    r2       key:bbbb   3     no        no        30 s\n\n${RANK_LEGEND}\n`,
  );
  assert.equal(renderQueue({ asOf: 1, queues: [] }, now), 'every queue is empty\n');
});

test('waiting for a deploy: live replicas, and gone ones with the failure that names them', () => {
  const s = replicaStates(cluster, 'm', ['m#1', 'm#2', 'm#3']);
  assert.equal(s[0]!.live?.state, 'HOT');
  assert.equal(s[1]!.live, null);
  assert.equal(s[1]!.failure?.kind, 'REFUSED');
  assert.equal(s[2]!.live, null);
  assert.equal(s[2]!.failure, null);
});
