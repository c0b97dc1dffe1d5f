// Requeueing the requests in flight on a replica, shared by the rules that take a replica away from them (agent
// lost or restarted, eviction, demotion): each request once per round, with a command id per attempt, so a
// restarted scheduler repeating the decision is a no-op.
import type { ControlPlaneCommand } from '../../domain/commands.js';
import type { RequeueReason } from '../../domain/events/index.js';
import type { EventRef } from '../../projections/decode.js';
import type { RequestView } from '../../projections/requests/state.js';
import type { PlanContext } from '../plan-context.js';
import { inFlightOn } from '../view-queries.js';

type Because = Extract<ControlPlaneCommand, { type: 'RequeueRequest' }>['because'];

type Crash = Extract<ControlPlaneCommand, { type: 'RequeueRequest' }>['crash'];

export function requeueInFlight(
  ctx: PlanContext,
  replicaId: string,
  reason: RequeueReason,
  because: (v: RequestView) => Because,
  cause: EventRef,
  crash?: Crash,
): void {
  for (const v of inFlightOn(ctx.state, replicaId)) {
    if (ctx.touchedRequests.has(v.requestId)) continue;
    ctx.touchedRequests.add(v.requestId);
    ctx.emit(
      `sched:requeue:${v.requestId}:${v.attempt}`,
      {
        type: 'RequeueRequest',
        requestId: v.requestId,
        attempt: v.attempt,
        reason,
        because: because(v),
        ...(crash ? { crash } : {}),
      },
      cause,
    );
  }
}
