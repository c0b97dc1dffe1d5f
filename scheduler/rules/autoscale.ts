// Autoscale (NDIF): when the oldest queued request of a model has waited longer than the threshold (30 s), add
// one replica copying a live replica's settings, up to the maximum (3), at most once per backoff (120 s); checked
// every autoscaleCheckMs (5 s). Not while a replica is already on its way, nor for a model an operator disabled.
import { fmtMs } from '../../domain/shared/format.js';
import type { PlanContext } from '../plan-context.js';
import { activeReplicas } from '../../projections/cluster/queries.js';
import { modelDisabled } from '../../projections/models/projection.js';
import { oldestQueued, queuedModels, queueLength } from '../../projections/queue/queries.js';

export function autoscaleRule(ctx: PlanContext): void {
  if (!ctx.input.autoscale) return;
  const s = ctx.state;
  for (const modelKey of queuedModels(s.queue)) {
    if (modelDisabled(s.models, modelKey) !== undefined) continue;
    const replicas = activeReplicas(s.cluster, modelKey);
    const hot = replicas.filter((r) => r.state === 'HOT').sort((a, b) => (b.placedAtMs ?? 0) - (a.placedAtMs ?? 0));
    if (hot.length === 0) continue;
    if (replicas.some((r) => r.state === 'REQUESTED' || r.state === 'PLACED' || r.state === 'LOADING')) continue;
    const a = hot[0].settings.autoscale;
    const live = replicas.filter((r) => r.state === 'HOT').length;
    const dep = s.cluster.deployments.get(modelKey)!;
    if (!a.enabled || live >= a.maxReplicas) continue;
    if (dep.lastAutoscaleAtMs !== null && ctx.now - dep.lastAutoscaleAtMs < a.backoffMs) continue;
    const oldest = oldestQueued(s.queue, modelKey)!;
    const waited = ctx.now - oldest.enqueuedAtMs;
    if (waited <= a.thresholdMs) continue;
    const queued = queueLength(s.queue, modelKey);
    const v = s.requests.byId.get(oldest.requestId)!;
    ctx.emit(
      `sched:autoscale:${modelKey}:${dep.replicaIds.length}`,
      {
        type: 'AutoscaleDeployment',
        modelKey,
        oldestWaitMs: waited,
        queued,
        because: {
          rule: 'autoscale-oldest-wait',
          text: `the oldest of ${queued} queued request(s) (${oldest.requestId}) has waited ${fmtMs(waited)} > ${fmtMs(a.thresholdMs)}; ${live} of at most ${a.maxReplicas} replica(s); copying ${hot[0].replicaId}`,
          numbers: {
            oldestWaitMs: waited,
            thresholdMs: a.thresholdMs,
            queued,
            liveReplicas: live,
            maxReplicas: a.maxReplicas,
            backoffMs: a.backoffMs,
            sinceLastAutoscaleMs: dep.lastAutoscaleAtMs === null ? null : ctx.now - dep.lastAutoscaleAtMs,
          },
          refs: { requestId: oldest.requestId, copiedFrom: hot[0].replicaId },
        },
      },
      v.lastEvent,
    );
  }
}
