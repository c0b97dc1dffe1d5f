// The deployment decider: deploy (additive), scale (copying a live replica's settings), autoscale (max and
// backoff), placement decisions recorded with their numbers, demote/evict in two steps (requested, then completed
// once no request is in flight on the replica — the scheduler requeues those in between), and replica reports.
import type { AgentReportIgnoredData, Because, DeploymentEvent, DeploymentSettings } from '../events/index.js';
import { fmtMs } from '../shared/format.js';
import type { Decider } from '../shared/decider.js';
import { DomainErrorCode as C, refuse } from '../shared/errors.js';
import { replicaIdOf } from '../shared/ids.js';
import { toMs } from '../shared/time.js';
import type {
  AutoscaleDeployment,
  DemoteReplica,
  DeploymentCommand,
  EvictDeployment,
  EvictReplica,
  PlaceReplica,
  RefuseReplica,
  ReleaseAgentReplicas,
  ReportReplicaFailed,
  ReportReplicaHot,
  ReportReplicaLoading,
  RequestDeployment,
  ScaleDeployment,
} from './commands.js';
import { resolveSettings } from './settings.js';
import { evolveDeployment, initialDeploymentState, LIVE, type DeploymentState, type ReplicaState } from './state.js';

export function decideDeployment(c: DeploymentCommand, s: DeploymentState): DeploymentEvent[] {
  switch (c.type) {
    case 'RequestDeployment':
      return requestDeployment(c, s);
    case 'ScaleDeployment':
      return scale(c, s);
    case 'AutoscaleDeployment':
      return autoscale(c, s);
    case 'PlaceReplica':
      return place(c, s);
    case 'RefuseReplica':
      return refuseReplica(c, s);
    case 'DemoteReplica':
      return demote(c, s);
    case 'EvictReplica':
      return evict(c, s);
    case 'EvictDeployment':
      return evictDeployment(c, s);
    case 'CompleteReplicaEviction': {
      const r = replica(s, c.replicaId);
      if (r.state !== 'UNLOADING') return [];
      return [
        {
          type: 'ReplicaRemoved',
          data: { modelKey: s.modelKey, replicaId: r.replicaId, reason: r.unloading ?? 'EVICTED', because: c.because },
        },
      ];
    }
    case 'CompleteReplicaDemotion': {
      const r = replica(s, c.replicaId);
      if (r.state !== 'DEMOTING') return [];
      return [
        {
          type: 'ReplicaDemoted',
          data: {
            modelKey: s.modelKey,
            replicaId: r.replicaId,
            agentId: r.agentId!,
            cpuBytes: r.settings.weightsBytes,
          },
        },
      ];
    }
    case 'ReleaseAgentReplicas':
      return releaseAgent(c, s);
    case 'PinDeployment':
      mustExist(s, c.modelKey);
      return s.pinned === c.pinned
        ? []
        : [{ type: 'DeploymentPinned', data: { modelKey: s.modelKey, pinned: c.pinned, by: c.actor } }];
    case 'ReportReplicaLoading':
    case 'ReportReplicaHot':
    case 'ReportReplicaFailed':
      return report(c, s);
  }
}

function mustExist(s: DeploymentState, modelKey: string): void {
  if (!s.exists)
    refuse(C.deploymentNotFound, `model ${modelKey} has never been deployed`, 'deploy it first (ndif deploy <model>)');
}

function replica(s: DeploymentState, replicaId: string): ReplicaState {
  const r = s.replicas[replicaId];
  if (r === undefined)
    refuse(C.replicaNotFound, `replica ${replicaId} does not exist`, 'list replicas with ndif status');
  return r;
}

const replicas = (s: DeploymentState) => Object.values(s.replicas);
const liveReplicas = (s: DeploymentState) => replicas(s).filter((r) => LIVE.has(r.state));

/** The replica whose settings scale copies: the newest HOT one, else the newest on its way to HOT. */
function settingsSource(s: DeploymentState): ReplicaState | undefined {
  const byNewest = replicas(s).sort(
    (a, b) => (b.placedAtMs ?? 0) - (a.placedAtMs ?? 0) || (a.replicaId < b.replicaId ? 1 : -1),
  );
  return byNewest.find((r) => r.state === 'HOT') ?? [...liveReplicas(s)].reverse()[0];
}

function replicaRequests(
  s: DeploymentState,
  n: number,
  settings: DeploymentSettings,
  reason: 'DEPLOY' | 'ON_DEMAND' | 'SCALE' | 'AUTOSCALE' | 'REPLACE',
  copiedFrom: string | null,
  force: boolean,
  at: string,
  modelKey = s.modelKey,
): DeploymentEvent[] {
  const out: DeploymentEvent[] = [];
  for (let i = 1; i <= n; i++) {
    out.push({
      type: 'ReplicaRequested',
      data: {
        modelKey,
        replicaId: replicaIdOf(modelKey, s.counter + i),
        settings,
        reason,
        copiedFrom,
        force,
        requestedAt: at,
      },
    });
  }
  return out;
}

function requestDeployment(c: RequestDeployment, s: DeploymentState): DeploymentEvent[] {
  if (!Number.isSafeInteger(c.replicas) || c.replicas < 1 || c.replicas > 16) {
    refuse(
      C.invalidSettings,
      `replicas must be an integer from 1 to 16, got ${JSON.stringify(c.replicas)}`,
      undefined,
      { field: 'replicas' },
    );
  }
  const settings = resolveSettings(c.settings);
  if (c.onDemand && liveReplicas(s).length > 0) return [];
  return [
    {
      type: 'DeploymentRequested',
      data: {
        modelKey: c.modelKey,
        settings,
        replicas: c.replicas,
        onDemand: c.onDemand,
        pinned: c.pinned ?? false,
        because: c.because ?? null,
      },
    },
    ...replicaRequests(
      s,
      c.replicas,
      settings,
      c.onDemand ? 'ON_DEMAND' : 'DEPLOY',
      null,
      c.force ?? false,
      c.at,
      c.modelKey,
    ),
  ];
}

function scale(c: ScaleDeployment, s: DeploymentState): DeploymentEvent[] {
  mustExist(s, c.modelKey);
  if (!Number.isSafeInteger(c.replicas) || c.replicas < 0 || c.replicas > 64) {
    refuse(
      C.invalidSettings,
      `replicas must be an integer from 0 to 64, got ${JSON.stringify(c.replicas)}`,
      undefined,
      { field: 'replicas' },
    );
  }
  const live = liveReplicas(s);
  if (c.replicas === live.length) return [];
  const because: Because = {
    rule: 'operator-scale',
    text: `operator scaled ${s.modelKey} from ${live.length} to ${c.replicas} live replica(s)`,
    numbers: { fromReplicas: live.length, toReplicas: c.replicas },
  };
  const scaled: DeploymentEvent = {
    type: 'DeploymentScaled',
    data: {
      modelKey: s.modelKey,
      trigger: 'operator',
      fromReplicas: live.length,
      toReplicas: c.replicas,
      scaledAt: c.at,
      because,
    },
  };
  if (c.replicas > live.length) {
    const source = settingsSource(s);
    if (source === undefined) {
      refuse(
        C.deploymentNotLive,
        `${s.modelKey} has no live replica to copy settings from`,
        'deploy it with explicit settings (ndif deploy) instead of scaling',
      );
    }
    return [
      scaled,
      ...replicaRequests(s, c.replicas - live.length, source.settings, 'SCALE', source.replicaId, false, c.at),
    ];
  }
  // Scale down: withdraw requested replicas first, then the newest placed, then the newest HOT.
  const order = { REQUESTED: 0, PLACED: 1, LOADING: 1, HOT: 2 } as Record<string, number>;
  const surplus = [...live]
    .sort(
      (a, b) =>
        order[a.state] - order[b.state] ||
        (b.placedAtMs ?? 0) - (a.placedAtMs ?? 0) ||
        (a.replicaId < b.replicaId ? 1 : -1),
    )
    .slice(0, live.length - c.replicas);
  return [scaled, ...surplus.flatMap((r) => evictOne(s, r, 'SCALE_DOWN', because))];
}

function autoscale(c: AutoscaleDeployment, s: DeploymentState): DeploymentEvent[] {
  mustExist(s, c.modelKey);
  const source = settingsSource(s);
  if (source === undefined) refuse(C.deploymentNotLive, `${s.modelKey} has no live replica to copy settings from`);
  const a = source.settings.autoscale;
  const live = liveReplicas(s).length;
  if (!a.enabled) refuse(C.autoscaleMax, `autoscale is disabled for ${s.modelKey}`);
  if (live >= a.maxReplicas)
    refuse(
      C.autoscaleMax,
      `${s.modelKey} has ${live} live replica(s), the autoscale maximum is ${a.maxReplicas}`,
      undefined,
      { live, maxReplicas: a.maxReplicas },
    );
  const now = toMs(c.at);
  if (s.lastAutoscaleAtMs !== null && now - s.lastAutoscaleAtMs < a.backoffMs) {
    refuse(
      C.autoscaleBackoff,
      `${s.modelKey} autoscaled ${fmtMs(now - s.lastAutoscaleAtMs)} ago; the backoff is ${fmtMs(a.backoffMs)}`,
      undefined,
      {
        sinceLastMs: now - s.lastAutoscaleAtMs,
        backoffMs: a.backoffMs,
      },
    );
  }
  if (c.oldestWaitMs <= a.thresholdMs) {
    refuse(
      C.autoscaleBackoff,
      `the oldest request of ${s.modelKey} waited ${fmtMs(c.oldestWaitMs)}, not more than the threshold ${fmtMs(a.thresholdMs)}`,
    );
  }
  return [
    {
      type: 'DeploymentScaled',
      data: {
        modelKey: s.modelKey,
        trigger: 'autoscale',
        fromReplicas: live,
        toReplicas: live + 1,
        scaledAt: c.at,
        because: c.because,
      },
    },
    ...replicaRequests(s, 1, source.settings, 'AUTOSCALE', source.replicaId, false, c.at),
  ];
}

function place(c: PlaceReplica, s: DeploymentState): DeploymentEvent[] {
  const r = replica(s, c.replicaId);
  if (r.state === 'PLACED' && r.agentId === c.agentId && r.bootId === c.bootId) return [];
  if (r.state === 'REMOVED' && r.removedReason === 'RESTORED_INTO') return [];
  if (r.state !== 'REQUESTED')
    refuse(C.replicaWrongState, `replica ${c.replicaId} is ${r.state}; only a REQUESTED replica is placed`, undefined, {
      state: r.state,
    });
  const sizeBytes = r.settings.sizeBytes;
  if (c.gpus.length !== r.settings.gpus || c.bytesPerGpu * c.gpus.length < sizeBytes) {
    refuse(
      C.invalidSettings,
      `replica ${c.replicaId} needs ${r.settings.gpus} GPU(s) and ${sizeBytes} B; the placement gives ${c.gpus.length} GPU(s) × ${c.bytesPerGpu} B`,
    );
  }
  const placement = {
    agentId: c.agentId,
    bootId: c.bootId,
    gpus: c.gpus,
    bytesPerGpu: c.bytesPerGpu,
    placedAt: c.at,
    level: c.level,
    candidates: c.candidates,
    ...(c.omitted === undefined ? {} : { omitted: c.omitted }),
    because: c.because,
  };
  if (c.cachedReplicaId !== null) {
    const cached = replica(s, c.cachedReplicaId);
    if (cached.state !== 'WARM' || cached.agentId !== c.agentId) {
      refuse(
        C.replicaWrongState,
        `replica ${c.cachedReplicaId} is ${cached.state} on ${cached.agentId ?? 'no agent'}, not WARM on ${c.agentId}; it cannot be restored there`,
      );
    }
    return [
      {
        type: 'ReplicaRestored',
        data: { modelKey: s.modelKey, replicaId: cached.replicaId, forReplicaId: r.replicaId, ...placement },
      },
    ];
  }
  return [{ type: 'ReplicaPlaced', data: { modelKey: s.modelKey, replicaId: r.replicaId, sizeBytes, ...placement } }];
}

function refuseReplica(c: RefuseReplica, s: DeploymentState): DeploymentEvent[] {
  const r = replica(s, c.replicaId);
  if (r.state !== 'REQUESTED') return [];
  return [
    {
      type: 'DeploymentRefused',
      data: {
        modelKey: s.modelKey,
        replicaId: r.replicaId,
        neededBytes: r.settings.sizeBytes,
        bytesPerGpu: c.bytesPerGpu,
        gpus: r.settings.gpus,
        bestGpuFreeBytes: c.bestGpuFreeBytes,
        evictableBytes: c.evictableBytes,
        candidates: c.candidates,
        ...(c.omitted === undefined ? {} : { omitted: c.omitted }),
        refusedAt: c.at,
        because: c.because,
      },
    },
  ];
}

function protection(s: DeploymentState, r: ReplicaState, nowMs: number): string | null {
  if (s.pinned) return `${s.modelKey} is pinned`;
  const age = r.placedAtMs === null ? 0 : nowMs - r.placedAtMs;
  if (age < r.settings.minDeploymentMs)
    return `replica ${r.replicaId} is ${fmtMs(age)} old, younger than its minimum deployment time ${fmtMs(r.settings.minDeploymentMs)}`;
  return null;
}

function demote(c: DemoteReplica, s: DeploymentState): DeploymentEvent[] {
  const r = replica(s, c.replicaId);
  if (r.state === 'DEMOTING' || r.state === 'WARM') return [];
  if (r.state !== 'HOT')
    refuse(C.replicaWrongState, `replica ${c.replicaId} is ${r.state}; only a HOT replica is demoted`, undefined, {
      state: r.state,
    });
  const p = c.force ? null : protection(s, r, toMs(c.at));
  if (p !== null)
    refuse(C.replicaProtected, `replica ${c.replicaId} is protected from demotion: ${p}`, 'an operator may force it');
  return [
    { type: 'ReplicaDemotionRequested', data: { modelKey: s.modelKey, replicaId: r.replicaId, because: c.because } },
  ];
}

/** The events that take one replica out: withdraw, remove at once, or start unloading (HOT: requests may be in flight). */
function evictOne(
  s: DeploymentState,
  r: ReplicaState,
  reason: 'OPERATOR' | 'MAKE_ROOM' | 'SCALE_DOWN' | 'AGENT_DRAINED' | 'MODEL_EVICTED',
  because: Because,
  force = true,
): DeploymentEvent[] {
  const removal = {
    OPERATOR: 'EVICTED',
    MAKE_ROOM: 'MAKE_ROOM',
    SCALE_DOWN: 'SCALE_DOWN',
    AGENT_DRAINED: 'AGENT_DRAINED',
    MODEL_EVICTED: 'MODEL_EVICTED',
  } as const;
  switch (r.state) {
    case 'REQUESTED':
      return [
        {
          type: 'ReplicaRemoved',
          data: { modelKey: s.modelKey, replicaId: r.replicaId, reason: 'WITHDRAWN', because },
        },
      ];
    case 'PLACED':
    case 'LOADING':
    case 'WARM':
      return [
        {
          type: 'ReplicaRemoved',
          data: { modelKey: s.modelKey, replicaId: r.replicaId, reason: removal[reason], because },
        },
      ];
    case 'HOT':
    case 'DEMOTING':
      return [
        {
          type: 'ReplicaEvictionRequested',
          data: { modelKey: s.modelKey, replicaId: r.replicaId, reason, force, because },
        },
      ];
    default:
      return [];
  }
}

function evict(c: EvictReplica, s: DeploymentState): DeploymentEvent[] {
  const r = replica(s, c.replicaId);
  const force = c.force || c.reason === 'OPERATOR' || c.reason === 'AGENT_DRAINED';
  if (!force && (r.state === 'HOT' || r.state === 'PLACED' || r.state === 'LOADING')) {
    const p = protection(s, r, toMs(c.at));
    if (p !== null)
      refuse(
        C.replicaProtected,
        `replica ${c.replicaId} is protected from eviction: ${p}`,
        'an operator may force it (ndif evict --force)',
      );
  }
  const out = evictOne(s, r, c.reason, c.because, force);
  if (out.length > 0 && c.replace && LIVE.has(r.state))
    out.push(...replicaRequests(s, 1, r.settings, 'REPLACE', r.replicaId, false, c.at));
  return out;
}

function evictDeployment(c: EvictDeployment, s: DeploymentState): DeploymentEvent[] {
  mustExist(s, c.modelKey);
  const because: Because = {
    rule: 'operator-evict-model',
    text: `operator ${c.actor} evicted every replica of ${s.modelKey}`,
    refs: { actor: c.actor },
  };
  const out = replicas(s).flatMap((r) => evictOne(s, r, 'MODEL_EVICTED', because));
  if (out.length === 0) return [];
  return [{ type: 'DeploymentEvicted', data: { modelKey: s.modelKey, by: c.actor, force: true } }, ...out];
}

function releaseAgent(c: ReleaseAgentReplicas, s: DeploymentState): DeploymentEvent[] {
  const out: DeploymentEvent[] = [];
  for (const r of replicas(s)) {
    if (r.agentId !== c.agentId || r.state === 'REMOVED' || r.state === 'FAILED' || r.state === 'REQUESTED') continue;
    const keepsGpu = r.state === 'PLACED' || r.state === 'LOADING' || r.state === 'HOT';
    if (c.reason === 'AGENT_RESTARTED' && keepsGpu) {
      if (r.bootId === c.bootId) continue;
      // The new process holds nothing (and never got the old boot's load assignment): load again on the same
      // GPUs, whose memory stays reserved for it.
      out.push({
        type: 'ReplicaReloadRequired',
        data: {
          modelKey: s.modelKey,
          replicaId: r.replicaId,
          agentId: c.agentId,
          previousBootId: c.previousBootId,
          bootId: c.bootId,
        },
      });
      continue;
    }
    out.push({
      type: 'ReplicaRemoved',
      data: { modelKey: s.modelKey, replicaId: r.replicaId, reason: c.reason, because: c.because },
    });
  }
  return out;
}

type Report = ReportReplicaLoading | ReportReplicaHot | ReportReplicaFailed;

function report(c: Report, s: DeploymentState): DeploymentEvent[] {
  const kind = (
    {
      ReportReplicaLoading: 'ReplicaLoading',
      ReportReplicaHot: 'ReplicaHot',
      ReportReplicaFailed: 'ReplicaFailed',
    } as const
  )[c.type];
  const r = s.replicas[c.replicaId];
  const ignore = (reason: AgentReportIgnoredData['reason'], text: string): DeploymentEvent[] => [
    {
      type: 'AgentReportIgnored',
      data: {
        report: kind,
        agentId: c.agentId,
        agentMessageId: c.agentMessageId,
        replicaId: c.replicaId,
        reason,
        text,
        current: { status: r?.state ?? 'NONE', agentId: r?.agentId ?? null },
      },
    },
  ];
  if (r === undefined) return ignore('UNKNOWN_REPLICA', `replica ${c.replicaId} does not exist`);
  if (r.agentId !== c.agentId)
    return ignore('WRONG_AGENT', `replica ${c.replicaId} is placed on ${r.agentId ?? 'no agent'}, not ${c.agentId}`);
  const modelKey = s.modelKey;
  switch (c.type) {
    case 'ReportReplicaLoading':
      if (r.state === 'LOADING' || r.state === 'HOT') return [];
      if (r.state !== 'PLACED')
        return ignore(
          'WRONG_STATE',
          `replica ${c.replicaId} is ${r.state}; a loading report applies to a PLACED replica`,
        );
      return [{ type: 'ReplicaLoading', data: { modelKey, replicaId: r.replicaId, agentId: c.agentId } }];
    case 'ReportReplicaHot':
      if (r.state === 'HOT') return [];
      if (r.state !== 'PLACED' && r.state !== 'LOADING')
        return ignore(
          'WRONG_STATE',
          `replica ${c.replicaId} is ${r.state}; a HOT report applies to a PLACED or LOADING replica`,
        );
      return [
        {
          type: 'ReplicaHot',
          data: {
            modelKey,
            replicaId: r.replicaId,
            agentId: c.agentId,
            hotAt: c.at,
            loadMs: c.loadMs,
            ...(c.weightsFingerprint === undefined ? {} : { weightsFingerprint: c.weightsFingerprint }),
          },
        },
      ];
    case 'ReportReplicaFailed':
      if (r.state === 'FAILED') return [];
      if (r.state === 'REMOVED' || r.state === 'WARM' || r.state === 'REQUESTED') {
        return ignore('WRONG_STATE', `replica ${c.replicaId} is ${r.state}; the failure changes nothing`);
      }
      return [
        {
          type: 'ReplicaFailed',
          data: {
            modelKey,
            replicaId: r.replicaId,
            agentId: c.agentId,
            phase: c.phase,
            message: c.message,
            failedAt: c.at,
          },
        },
      ];
  }
}

export const deploymentDecider: Decider<DeploymentCommand, DeploymentState, DeploymentEvent> = {
  initialState: initialDeploymentState,
  evolve: evolveDeployment,
  decide: decideDeployment,
};
