// Queued requests for a model without a live replica: deploy it on demand when the model key is allowed;
// fail them with the reason when it is not, or when the deployment was refused or failed to load after they
// were queued (the refusal's numbers are the error's message). Requests queued after such a failure try again.
// A model an operator has disabled is never deployed: its queued requests keep their place (their own queue
// timeout still applies) and are served once it is enabled.
import type { PlanContext } from '../plan-context.js';
import { activeReplicas, hasReplicaIn } from '../../projections/cluster/queries.js';
import { modelDisabled } from '../../projections/models/projection.js';
import { heads, queuedModels } from '../../projections/queue/queries.js';
import type { DeploymentOutcome } from '../../projections/cluster/state.js';
import { LIVE_STATES } from '../view-queries.js';

export function onDemandRule(ctx: PlanContext): void {
  const s = ctx.state;
  for (const modelKey of queuedModels(s.queue)) {
    if (modelDisabled(s.models, modelKey) !== undefined) continue;
    if (hasReplicaIn(s.cluster, modelKey, LIVE_STATES)) continue;
    const replicas = activeReplicas(s.cluster, modelKey);
    const dep = s.cluster.deployments.get(modelKey);
    const entries = heads(s.queue, modelKey, Number.POSITIVE_INFINITY).filter((e) => !ctx.touchedRequests.has(e.id));
    const failure = failureForWaiting(s, dep?.lastFailure ?? null);
    const waiting = [];
    for (const e of entries) {
      if (failure !== null && e.value.queuedAtMs <= failure.atMs) {
        const v = s.requests.byId.get(e.id)!;
        ctx.touchedRequests.add(e.id);
        ctx.emit(
          `sched:deploy-failed:${e.id}:${failure.event.id}`,
          {
            type: 'FailRequest',
            requestId: e.id,
            when: 'QUEUED',
            attempt: v.attempt,
            phase: failure.kind === 'REFUSED' ? 'placement' : 'deployment',
            errorType: failure.kind === 'REFUSED' ? 'DeploymentRefused' : 'ReplicaLoadFailed',
            message: failure.text,
            because: {
              rule: 'deployment-failed',
              text: `${modelKey} has no live replica and its latest ${failure.kind === 'REFUSED' ? 'placement was refused' : 'load failed'} after this request was queued`,
              refs: { replicaId: failure.replicaId, eventId: failure.event.id },
            },
          },
          failure.event,
        );
      } else waiting.push(e);
    }
    if (waiting.length === 0) continue;
    const spec = ctx.input.config.onDemand(modelKey);
    const oldest = s.requests.byId.get(waiting[0].id)!;
    if (spec === undefined) {
      for (const e of waiting) {
        const v = s.requests.byId.get(e.id)!;
        ctx.touchedRequests.add(e.id);
        ctx.emit(
          `sched:not-deployable:${e.id}:${v.attempt}`,
          {
            type: 'FailRequest',
            requestId: e.id,
            when: 'QUEUED',
            attempt: v.attempt,
            phase: 'placement',
            errorType: 'ModelNotDeployable',
            message: `model ${modelKey} has no live replica and may not be deployed on demand (it is not in the model allowlist)`,
            because: { rule: 'on-demand-not-allowed', text: `${modelKey} is not deployed and not allowed on demand` },
          },
          v.lastEvent,
        );
      }
      continue;
    }
    ctx.emit(
      `sched:on-demand:${modelKey}:${dep?.replicaIds.length ?? 0}`,
      {
        type: 'RequestDeployment',
        modelKey,
        settings: spec.settings,
        replicas: 1,
        onDemand: true,
        because: {
          rule: 'deploy-on-demand',
          text: `${waiting.length} request(s) queued for ${modelKey}, which has no live replica${replicas.length > 0 ? ` (${replicas.map((r) => `${r.replicaId} ${r.state}`).join(', ')})` : ''}`,
          numbers: { queued: waiting.length },
          refs: { requestId: oldest.requestId },
        },
      },
      oldest.lastEvent,
    );
  }
}

/**
 * The failure that tells waiting requests their model cannot be deployed. A replica added to a deployment that had
 * live ones (an operator's scale, an autoscale step) being refused or failing says only that one more did not fit:
 * requests waiting once the live ones are gone (evicted) get a deployment of their own to try.
 */
function failureForWaiting(s: PlanContext['state'], failure: DeploymentOutcome | null): DeploymentOutcome | null {
  if (failure === null) return null;
  const requestedFor = s.cluster.replicas.get(failure.replicaId)?.requestedFor;
  return requestedFor === 'AUTOSCALE' || requestedFor === 'SCALE' ? null : failure;
}
