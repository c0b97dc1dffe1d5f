// Deployment and replica rules in given/when/then form.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DeploymentCommand } from '../../domain/deployment/commands.js';
import { deploymentDecider } from '../../domain/deployment/decide.js';
import type { DeploymentState } from '../../domain/deployment/state.js';
import type { DeploymentEvent } from '../../domain/events/index.js';
import { GIB, MIB } from '../../domain/placement/size.js';
import { at, deployed, hot, placed, settings, T0, why } from './fixtures.js';
import { fold, given } from './gwt.js';

const g = (h: DeploymentEvent[] = []) =>
  given<DeploymentCommand, DeploymentState, DeploymentEvent>(deploymentDecider, h);
const size = settings().sizeBytes;
const live = (h: DeploymentEvent[]) => [
  ...deployed('gpt2'),
  placed('gpt2', 1, 'a1', [0], size),
  hot('gpt2', 1, 'a1'),
  ...h,
];

describe('deployment: deploy', () => {
  it('records resolved settings (size = weights × 1.15 + 500 MiB) and one requested replica per count', () => {
    g()
      .when({
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: 2 * GIB },
        replicas: 2,
        onDemand: false,
        at: T0,
      })
      .thenMatch((es) => {
        assert.deepEqual(
          es.map((e) => e.type),
          ['DeploymentRequested', 'ReplicaRequested', 'ReplicaRequested'],
        );
        const d = es[0].type === 'DeploymentRequested' ? es[0].data : undefined;
        assert.equal(d?.settings.sizeBytes, Math.ceil(2 * GIB * 1.15) + 500 * MIB);
        assert.deepEqual(
          es.slice(1).map((e) => (e.type === 'ReplicaRequested' ? e.data.replicaId : '')),
          ['gpt2#1', 'gpt2#2'],
        );
      });
  });
  it('is additive: a second deploy adds replicas with its own settings and the next ids', () => {
    g(deployed('gpt2'))
      .when({
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: 2 * GIB, gpus: 2, paddingFactor: 0.5 },
        replicas: 1,
        onDemand: false,
        at: T0,
      })
      .thenMatch((es) => {
        const r = es[1].type === 'ReplicaRequested' ? es[1].data : undefined;
        assert.equal(r?.replicaId, 'gpt2#2');
        assert.equal(r?.settings.gpus, 2);
        assert.equal(r?.settings.sizeBytes, 3 * GIB + 500 * MIB);
      });
  });
  it('deploy on demand does nothing when a replica is live or on its way', () => {
    g(deployed('gpt2'))
      .when({
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: 1 },
        replicas: 1,
        onDemand: true,
        at: T0,
      })
      .then([]);
  });
  it('bad settings are refused with the field named', () => {
    g()
      .when({
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: 1, gpus: 0 },
        replicas: 1,
        onDemand: false,
        at: T0,
      })
      .thenRefused('CP_INVALID_SETTINGS', /gpus/);
    g()
      .when({
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: -1 },
        replicas: 1,
        onDemand: false,
        at: T0,
      })
      .thenRefused('CP_INVALID_SETTINGS', /weightsBytes/);
    g()
      .when({
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { weightsBytes: 1 },
        replicas: 0,
        onDemand: false,
        at: T0,
      })
      .thenRefused('CP_INVALID_SETTINGS', /replicas/);
  });
});

describe('deployment: placement and replica reports', () => {
  it('a requested replica is placed with the numbers of the decision; a redelivery is a no-op', () => {
    const cmd: DeploymentCommand = {
      type: 'PlaceReplica',
      replicaId: 'gpt2#1',
      agentId: 'a1',
      bootId: 'b1',
      gpus: [0],
      bytesPerGpu: size,
      level: 'FREE',
      candidates: [],
      cachedReplicaId: null,
      at: T0,
      because: why,
    };
    const [e] = g(deployed('gpt2'))
      .when(cmd)
      .thenMatch(([e]) => assert.equal(e.type, 'ReplicaPlaced'));
    g([...deployed('gpt2'), e])
      .when(cmd)
      .then([]);
  });
  it('a placement giving fewer GPUs or bytes than the settings is refused', () => {
    g(deployed('gpt2'))
      .when({
        type: 'PlaceReplica',
        replicaId: 'gpt2#1',
        agentId: 'a1',
        bootId: 'b1',
        gpus: [0],
        bytesPerGpu: size - 1,
        level: 'FREE',
        candidates: [],
        cachedReplicaId: null,
        at: T0,
        because: why,
      })
      .thenRefused('CP_INVALID_SETTINGS');
  });
  it('loading and HOT reports move the replica; a report from another agent is ignored with the reason', () => {
    const h = [...deployed('gpt2'), placed('gpt2', 1, 'a1', [0], size)];
    g(h)
      .when({ type: 'ReportReplicaLoading', replicaId: 'gpt2#1', agentId: 'a1', agentMessageId: 'm1', at: T0 })
      .then([{ type: 'ReplicaLoading', data: { modelKey: 'gpt2', replicaId: 'gpt2#1', agentId: 'a1' } }]);
    g(h)
      .when({ type: 'ReportReplicaHot', replicaId: 'gpt2#1', agentId: 'a1', agentMessageId: 'm1', at: T0, loadMs: 5 })
      .then([hot('gpt2', 1, 'a1')].map((e) => ({ ...e, data: { ...e.data, loadMs: 5 } }) as DeploymentEvent));
    g(h)
      .when({ type: 'ReportReplicaHot', replicaId: 'gpt2#1', agentId: 'a9', agentMessageId: 'm1', at: T0, loadMs: 5 })
      .thenMatch(([e]) => assert.equal(e.type === 'AgentReportIgnored' && e.data.reason, 'WRONG_AGENT'));
  });
  it('a refusal names the numbers and closes the requested replica', () => {
    const [e] = g(deployed('gpt2'))
      .when({
        type: 'RefuseReplica',
        replicaId: 'gpt2#1',
        bytesPerGpu: size,
        bestGpuFreeBytes: GIB,
        evictableBytes: GIB,
        candidates: [
          {
            agentId: 'a1',
            gpus: [],
            level: 'CANT_ACCOMMODATE',
            freeBytes: GIB,
            evictableBytes: GIB,
            excluded: 'too small',
          },
        ],
        at: T0,
        because: why,
      })
      .thenMatch(([e]) => assert.equal(e.type === 'DeploymentRefused' && e.data.neededBytes, size));
    assert.equal(fold(deploymentDecider, [...deployed('gpt2'), e]).replicas['gpt2#1'].state, 'REMOVED');
  });
});

describe('deployment: eviction and demotion', () => {
  it('evicting a HOT replica starts unloading (requests in flight are requeued before it completes)', () => {
    const h = live([]);
    const [e] = g(h)
      .when({
        type: 'EvictReplica',
        replicaId: 'gpt2#1',
        reason: 'OPERATOR',
        force: false,
        replace: false,
        at: at(10),
        because: why,
      })
      .thenMatch(([e]) => assert.equal(e.type, 'ReplicaEvictionRequested'));
    assert.equal(fold(deploymentDecider, [...h, e]).replicas['gpt2#1'].state, 'UNLOADING');
    g([...h, e])
      .when({ type: 'CompleteReplicaEviction', replicaId: 'gpt2#1', at: at(11), because: why })
      .then([
        { type: 'ReplicaRemoved', data: { modelKey: 'gpt2', replicaId: 'gpt2#1', reason: 'EVICTED', because: why } },
      ]);
  });
  it('eviction to make room never takes a young replica or a pinned deployment unless forced', () => {
    const h = live([]);
    const makeRoom = {
      type: 'EvictReplica',
      replicaId: 'gpt2#1',
      reason: 'MAKE_ROOM',
      force: false,
      replace: false,
      at: at(60),
      because: why,
    } as const;
    g(h)
      .when(makeRoom)
      .thenRefused('CP_REPLICA_PROTECTED', /younger than its minimum deployment time/);
    g(h)
      .when({ ...makeRoom, at: at(3600) })
      .thenMatch(([e]) => assert.equal(e.type, 'ReplicaEvictionRequested'));
    const pinned = [
      ...h,
      { type: 'DeploymentPinned', data: { modelKey: 'gpt2', pinned: true, by: 'op' } } as DeploymentEvent,
    ];
    g(pinned)
      .when({ ...makeRoom, at: at(7200) })
      .thenRefused('CP_REPLICA_PROTECTED', /pinned/);
    g(pinned)
      .when({ ...makeRoom, at: at(60), force: true })
      .thenMatch(([e]) => assert.equal(e.type, 'ReplicaEvictionRequested'));
  });
  it("an operator's evict bypasses pin and age", () => {
    const pinned = live([{ type: 'DeploymentPinned', data: { modelKey: 'gpt2', pinned: true, by: 'op' } }]);
    g(pinned)
      .when({
        type: 'EvictReplica',
        replicaId: 'gpt2#1',
        reason: 'OPERATOR',
        force: false,
        replace: false,
        at: at(1),
        because: why,
      })
      .thenMatch(([e]) => assert.equal(e.type, 'ReplicaEvictionRequested'));
  });
  it('demotion: HOT → DEMOTING → WARM holding its weights in the CPU cache', () => {
    const h = live([]);
    const [e] = g(h)
      .when({ type: 'DemoteReplica', replicaId: 'gpt2#1', force: false, at: at(4000), because: why })
      .thenMatch(([e]) => assert.equal(e.type, 'ReplicaDemotionRequested'));
    g([...h, e])
      .when({ type: 'CompleteReplicaDemotion', replicaId: 'gpt2#1', at: at(4001), because: why })
      .then([
        { type: 'ReplicaDemoted', data: { modelKey: 'gpt2', replicaId: 'gpt2#1', agentId: 'a1', cpuBytes: 2 * GIB } },
      ]);
    g(h)
      .when({ type: 'DemoteReplica', replicaId: 'gpt2#1', force: false, at: at(10), because: why })
      .thenRefused('CP_REPLICA_PROTECTED');
  });
  it('evicting a requested replica withdraws it; a placed one is removed at once (nothing runs on it)', () => {
    g(deployed('gpt2'))
      .when({
        type: 'EvictReplica',
        replicaId: 'gpt2#1',
        reason: 'OPERATOR',
        force: true,
        replace: false,
        at: T0,
        because: why,
      })
      .thenMatch(([e]) => assert.equal(e.type === 'ReplicaRemoved' && e.data.reason, 'WITHDRAWN'));
    g([...deployed('gpt2'), placed('gpt2', 1, 'a1', [0], size)])
      .when({
        type: 'EvictReplica',
        replicaId: 'gpt2#1',
        reason: 'OPERATOR',
        force: true,
        replace: false,
        at: T0,
        because: why,
      })
      .thenMatch(([e]) => assert.equal(e.type === 'ReplicaRemoved' && e.data.reason, 'EVICTED'));
  });
  it('a drained replica is replaced by a new requested one with its settings', () => {
    g(live([]))
      .when({
        type: 'EvictReplica',
        replicaId: 'gpt2#1',
        reason: 'AGENT_DRAINED',
        force: true,
        replace: true,
        at: T0,
        because: why,
      })
      .thenMatch((es) => {
        assert.deepEqual(
          es.map((e) => e.type),
          ['ReplicaEvictionRequested', 'ReplicaRequested'],
        );
        assert.equal(es[1].type === 'ReplicaRequested' && es[1].data.copiedFrom, 'gpt2#1');
      });
  });
  it('evicting the model takes every replica out', () => {
    g(
      live([
        {
          type: 'ReplicaRequested',
          data: {
            modelKey: 'gpt2',
            replicaId: 'gpt2#2',
            settings: settings(),
            reason: 'SCALE',
            copiedFrom: 'gpt2#1',
            force: false,
            requestedAt: T0,
          },
        },
      ]),
    )
      .when({ type: 'EvictDeployment', modelKey: 'gpt2', actor: 'op', at: T0 })
      .thenMatch((es) =>
        assert.deepEqual(
          es.map((e) => e.type),
          ['DeploymentEvicted', 'ReplicaEvictionRequested', 'ReplicaRemoved'],
        ),
      );
  });
  it('a WARM replica is restored in place of a requested one', () => {
    const h = live([
      { type: 'ReplicaDemotionRequested', data: { modelKey: 'gpt2', replicaId: 'gpt2#1', because: why } },
      { type: 'ReplicaDemoted', data: { modelKey: 'gpt2', replicaId: 'gpt2#1', agentId: 'a1', cpuBytes: 2 * GIB } },
      {
        type: 'ReplicaRequested',
        data: {
          modelKey: 'gpt2',
          replicaId: 'gpt2#2',
          settings: settings(),
          reason: 'ON_DEMAND',
          copiedFrom: null,
          force: false,
          requestedAt: T0,
        },
      },
    ]);
    const [e] = g(h)
      .when({
        type: 'PlaceReplica',
        replicaId: 'gpt2#2',
        agentId: 'a1',
        bootId: 'b1',
        gpus: [1],
        bytesPerGpu: size,
        level: 'CACHED_AND_FREE',
        candidates: [],
        cachedReplicaId: 'gpt2#1',
        at: at(5000),
        because: why,
      })
      .thenMatch(([e]) => assert.equal(e.type === 'ReplicaRestored' && e.data.forReplicaId, 'gpt2#2'));
    const s = fold(deploymentDecider, [...h, e]);
    assert.deepEqual(
      [s.replicas['gpt2#1'].state, s.replicas['gpt2#1'].gpus, s.replicas['gpt2#2'].state],
      ['PLACED', [1], 'REMOVED'],
    );
  });
});

describe('deployment: agent lost or restarted', () => {
  it('a lost agent takes its replicas with it', () => {
    g(live([]))
      .when({
        type: 'ReleaseAgentReplicas',
        modelKey: 'gpt2',
        agentId: 'a1',
        reason: 'AGENT_LOST',
        previousBootId: 'b1',
        bootId: 'b1',
        at: T0,
        because: why,
      })
      .thenMatch(([e]) => assert.equal(e.type === 'ReplicaRemoved' && e.data.reason, 'AGENT_LOST'));
  });
  it('releasing again for a boot the replica already reloaded on is a no-op', () => {
    const reload: DeploymentEvent = {
      type: 'ReplicaReloadRequired',
      data: { modelKey: 'gpt2', replicaId: 'gpt2#1', agentId: 'a1', previousBootId: 'b1', bootId: 'b2' },
    };
    g(live([reload]))
      .when({
        type: 'ReleaseAgentReplicas',
        modelKey: 'gpt2',
        agentId: 'a1',
        reason: 'AGENT_RESTARTED',
        previousBootId: 'b1',
        bootId: 'b2',
        at: T0,
        because: why,
      })
      .then([]);
  });
  it('a restarted agent loads its GPU replicas again on the same GPUs; its WARM copies are gone', () => {
    g(live([]))
      .when({
        type: 'ReleaseAgentReplicas',
        modelKey: 'gpt2',
        agentId: 'a1',
        reason: 'AGENT_RESTARTED',
        previousBootId: 'b1',
        bootId: 'b2',
        at: T0,
        because: why,
      })
      .then([
        {
          type: 'ReplicaReloadRequired',
          data: { modelKey: 'gpt2', replicaId: 'gpt2#1', agentId: 'a1', previousBootId: 'b1', bootId: 'b2' },
        },
      ]);
  });
});

describe('deployment: scale and autoscale', () => {
  it('scale copies the settings of the live replica', () => {
    const custom = settings({ gpus: 2, dtype: 'float16' });
    const h = [
      ...deployed('gpt2', custom),
      placed('gpt2', 1, 'a1', [0, 1], Math.ceil(custom.sizeBytes / 2)),
      hot('gpt2', 1, 'a1'),
    ];
    g(h)
      .when({ type: 'ScaleDeployment', modelKey: 'gpt2', replicas: 3, at: T0 })
      .thenMatch((es) => {
        assert.deepEqual(
          es.map((e) => e.type),
          ['DeploymentScaled', 'ReplicaRequested', 'ReplicaRequested'],
        );
        for (const e of es.slice(1))
          assert.deepEqual(e.type === 'ReplicaRequested' && [e.data.settings, e.data.copiedFrom], [custom, 'gpt2#1']);
      });
  });
  it('scale down withdraws requested replicas before touching HOT ones', () => {
    const h = live([
      {
        type: 'ReplicaRequested',
        data: {
          modelKey: 'gpt2',
          replicaId: 'gpt2#2',
          settings: settings(),
          reason: 'SCALE',
          copiedFrom: 'gpt2#1',
          force: false,
          requestedAt: T0,
        },
      },
    ]);
    g(h)
      .when({ type: 'ScaleDeployment', modelKey: 'gpt2', replicas: 1, at: T0 })
      .thenMatch((es) => assert.equal(es[1].type === 'ReplicaRemoved' && es[1].data.replicaId, 'gpt2#2'));
  });
  it('scale of a model without a live replica is refused', () => {
    g().when({ type: 'ScaleDeployment', modelKey: 'gpt2', replicas: 2, at: T0 }).thenRefused('CP_DEPLOYMENT_NOT_FOUND');
  });
  const auto = (seconds: number, wait = 31_000) =>
    ({
      type: 'AutoscaleDeployment',
      modelKey: 'gpt2',
      oldestWaitMs: wait,
      queued: 4,
      at: at(seconds),
      because: why,
    }) as const;
  it('autoscale adds one replica when the oldest wait passes 30 s, then backs off 120 s, up to 3 replicas', () => {
    const [scaled, req] = g(live([]))
      .when(auto(100))
      .thenMatch((es) =>
        assert.deepEqual(
          es.map((e) => e.type),
          ['DeploymentScaled', 'ReplicaRequested'],
        ),
      );
    const h = live([scaled, req]);
    g(h)
      .when(auto(150))
      .thenRefused('CP_AUTOSCALE_BACKOFF', /backoff is 120 s/);
    const [s2, r2] = g(h)
      .when(auto(221))
      .thenMatch((es) => assert.equal(es.length, 2));
    g([...h, s2, r2])
      .when(auto(400))
      .thenRefused('CP_AUTOSCALE_AT_MAX');
  });
  it('autoscale under the threshold is refused', () => {
    g(live([]))
      .when(auto(100, 30_000))
      .thenRefused('CP_AUTOSCALE_BACKOFF', /threshold/);
  });
});

describe('deployment: pin', () => {
  it('pin and unpin are recorded once', () => {
    g(deployed('gpt2'))
      .when({ type: 'PinDeployment', modelKey: 'gpt2', pinned: true, actor: 'op', at: T0 })
      .then([{ type: 'DeploymentPinned', data: { modelKey: 'gpt2', pinned: true, by: 'op' } }]);
    g(deployed('gpt2')).when({ type: 'PinDeployment', modelKey: 'gpt2', pinned: false, actor: 'op', at: T0 }).then([]);
  });
});
