// Dispatch: the queue heads of each model go to its HOT replicas on ACTIVE agents that have room (in flight <
// the replica's concurrency), every HOT replica considered on every decision, the least busy first. The queue is
// in fair-share order (submitters take turns inside a rank); a submitter already running as many requests as its
// key allows (maxRunning) is passed over until one of them finishes, as the positions users are told assume.
import type { PlanContext } from '../plan-context.js';
import { activeReplicas } from '../../projections/cluster/queries.js';
import { isHeld, runningBySubmitter } from '../../projections/control-plane/positions.js';
import { queuedModels, queueLength } from '../../projections/queue/queries.js';

/** Queued requests looked at per model and round before giving up on finding one not held by its key's limit. */
const MAX_SCAN = 5000;

export function dispatchRule(ctx: PlanContext): void {
  const s = ctx.state;
  for (const modelKey of queuedModels(s.queue)) {
    const slots = activeReplicas(s.cluster, modelKey)
      .filter((r) => {
        if (r.state !== 'HOT' || r.agentId === null || ctx.touchedReplicas.has(r.replicaId)) return false;
        const a = s.cluster.agents.get(r.agentId);
        return a !== undefined && a.state === 'ACTIVE' && a.bootId === r.bootId;
      })
      .map((r) => ({ r, inFlight: s.requests.inFlightByReplica.get(r.replicaId)?.size ?? 0 }))
      .filter((x) => x.inFlight < x.r.settings.concurrency);
    if (slots.length === 0) continue;
    const free = slots.reduce((n, x) => n + x.r.settings.concurrency - x.inFlight, 0);
    const queued = queueLength(s.queue, modelKey);
    const running = (ctx.running ??= runningBySubmitter(s.requests));
    let position = 0;
    let scanned = 0;
    let dispatched = 0;
    for (const head of s.queue.byModel.get(modelKey)!.entries()) {
      if (++scanned > MAX_SCAN + ctx.touchedRequests.size || dispatched >= free) break;
      const v = s.requests.byId.get(head.id)!;
      if (isHeld(running.get(v.submitter) ?? 0, v.options.maxRunning)) continue;
      const pos = position++;
      if (ctx.touchedRequests.has(head.id)) continue;
      slots.sort((a, b) => a.inFlight / a.r.settings.concurrency - b.inFlight / b.r.settings.concurrency || (a.r.replicaId < b.r.replicaId ? -1 : 1));
      const slot = slots[0];
      if (slot === undefined || slot.inFlight >= slot.r.settings.concurrency) break;
      ctx.touchedRequests.add(head.id);
      dispatched++;
      running.set(v.submitter, (running.get(v.submitter) ?? 0) + 1);
      ctx.emit(
        `sched:dispatch:${head.id}:${v.attempt + 1}`,
        {
          type: 'DispatchRequest',
          requestId: head.id,
          attempt: v.attempt + 1,
          replicaId: slot.r.replicaId,
          agentId: slot.r.agentId!,
          because: {
            rule: 'dispatch-queue-head',
            text: `position ${pos} of ${queued} in the ${modelKey} queue (rank ${head.key.rank}) to ${slot.r.replicaId}, ${slot.inFlight} of ${slot.r.settings.concurrency} slot(s) busy, ${slots.length} replica(s) with room`,
            numbers: { position: pos, queueLength: queued, rank: head.key.rank, replicaInFlight: slot.inFlight, concurrency: slot.r.settings.concurrency, replicasWithRoom: slots.length },
            refs: { replicaId: slot.r.replicaId, agentId: slot.r.agentId! },
          },
        },
        v.lastEvent,
      );
      slot.inFlight++;
      if (slot.inFlight >= slot.r.settings.concurrency) slots.shift();
      if (slots.length === 0) break;
    }
  }
}
