// Dispatch: the queue heads of each model go to its HOT replicas on ACTIVE agents that have room (in flight <
// the replica's concurrency), every HOT replica considered on every decision, the least busy first. The queue is
// in fair-share order (submitters take turns inside a rank); a submitter already running as many requests as its
// key allows (maxRunning) is passed over until one of them finishes, as the positions users are told assume.
//
// A poison suspect (a request that was in flight when an agent died) runs isolated: only on an agent with nothing
// in flight, and nothing else goes to that agent until it is done. A suspect at the head of its queue that finds no
// idle agent reserves the agents of its model's replicas (they get no new work, so one becomes idle); the requests
// behind it wait at most one run for that.
import type { PlanContext } from '../plan-context.js';
import { activeReplicas } from '../../projections/cluster/queries.js';
import { isHeld, runningBySubmitter } from '../../projections/control-plane/positions.js';
import { heads, queuedModels, queueLength } from '../../projections/queue/queries.js';
import type { ClusterReplica } from '../../projections/cluster/state.js';

/** Queued requests looked at per model and round before giving up on finding one not held by its key's limit. */
const MAX_SCAN = 5000;

interface AgentLoad {
  inFlight: number;
  /** An isolated attempt runs on the agent: it takes nothing else. */
  isolated: boolean;
}

interface Slot {
  r: ClusterReplica;
  inFlight: number;
}

function agentLoads(ctx: PlanContext): Map<string, AgentLoad> {
  const s = ctx.state;
  const loads = new Map<string, AgentLoad>();
  for (const r of s.cluster.replicas.values()) {
    if (r.agentId === null) continue;
    const set = s.requests.inFlightByReplica.get(r.replicaId);
    if (set === undefined || set.size === 0) continue;
    const load = loads.get(r.agentId) ?? { inFlight: 0, isolated: false };
    load.inFlight += set.size;
    for (const id of set) if (s.requests.byId.get(id)?.isolated) load.isolated = true;
    loads.set(r.agentId, load);
  }
  return loads;
}

function hotSlots(ctx: PlanContext, modelKey: string): Slot[] {
  const s = ctx.state;
  return activeReplicas(s.cluster, modelKey)
    .filter((r) => {
      if (r.state !== 'HOT' || r.agentId === null || ctx.touchedReplicas.has(r.replicaId)) return false;
      const a = s.cluster.agents.get(r.agentId);
      return a !== undefined && a.state === 'ACTIVE' && a.bootId === r.bootId;
    })
    .map((r) => ({ r, inFlight: s.requests.inFlightByReplica.get(r.replicaId)?.size ?? 0 }));
}

export function dispatchRule(ctx: PlanContext): void {
  const s = ctx.state;
  const loads = agentLoads(ctx);
  const load = (agentId: string): AgentLoad => loads.get(agentId) ?? { inFlight: 0, isolated: false };
  /** Agents held empty for a suspect waiting to run alone (agent id → the suspect's request id). */
  const reserved = new Map<string, string>();
  const models = queuedModels(s.queue);

  for (const modelKey of models) {
    const head = heads(s.queue, modelKey, 1)[0];
    const v = head === undefined ? undefined : s.requests.byId.get(head.id);
    if (v === undefined || v.crashes === 0 || ctx.touchedRequests.has(v.requestId)) continue;
    const slots = hotSlots(ctx, modelKey);
    if (slots.some((x) => load(x.r.agentId!).inFlight === 0 && !reserved.has(x.r.agentId!))) continue;
    for (const x of slots) if (!reserved.has(x.r.agentId!)) reserved.set(x.r.agentId!, v.requestId);
  }

  for (const modelKey of models) {
    const slots = hotSlots(ctx, modelKey).filter((x) => x.inFlight < x.r.settings.concurrency);
    if (slots.length === 0) continue;
    const free = slots.reduce((n, x) => n + x.r.settings.concurrency - x.inFlight, 0);
    const queued = queueLength(s.queue, modelKey);
    ctx.running ??= runningBySubmitter(s.requests);
    const running = ctx.running;
    let position = 0;
    let scanned = 0;
    let dispatched = 0;
    for (const head of s.queue.byModel.get(modelKey)!.entries()) {
      if (++scanned > MAX_SCAN + ctx.touchedRequests.size || dispatched >= free) break;
      const v = s.requests.byId.get(head.id)!;
      if (isHeld(running.get(v.submitter) ?? 0, v.options.maxRunning)) continue;
      const pos = position++;
      if (ctx.touchedRequests.has(head.id)) continue;
      const suspect = v.crashes > 0;
      const usable = slots.filter((x) => {
        if (x.inFlight >= x.r.settings.concurrency) return false;
        const a = load(x.r.agentId!);
        const holder = reserved.get(x.r.agentId!);
        if (a.isolated) return false;
        if (suspect) return a.inFlight === 0 && (holder === undefined || holder === v.requestId);
        return holder === undefined;
      });
      usable.sort(
        (a, b) =>
          a.inFlight / a.r.settings.concurrency - b.inFlight / b.r.settings.concurrency ||
          (a.r.replicaId < b.r.replicaId ? -1 : 1),
      );
      const slot = usable[0];
      // A suspect that cannot run alone yet holds its place: those behind it wait (at most one run).
      if (slot === undefined) break;
      ctx.touchedRequests.add(head.id);
      dispatched++;
      running.set(v.submitter, (running.get(v.submitter) ?? 0) + 1);
      const busy = usable.length;
      ctx.emit(
        `sched:dispatch:${head.id}:${v.attempt + 1}`,
        {
          type: 'DispatchRequest',
          requestId: head.id,
          attempt: v.attempt + 1,
          replicaId: slot.r.replicaId,
          agentId: slot.r.agentId!,
          because: {
            rule: suspect ? 'dispatch-isolated' : 'dispatch-queue-head',
            text: suspect
              ? `position ${pos} of ${queued} in the ${modelKey} queue: it was in flight when an agent died (${v.crashes} time${v.crashes === 1 ? '' : 's'}), so it runs alone on ${slot.r.agentId} (${slot.r.replicaId}), in a sandbox runner where the agent has one`
              : `position ${pos} of ${queued} in the ${modelKey} queue (rank ${head.key.rank}) to ${slot.r.replicaId}, ${slot.inFlight} of ${slot.r.settings.concurrency} slot(s) busy, ${busy} replica(s) with room`,
            numbers: {
              position: pos,
              queueLength: queued,
              rank: head.key.rank,
              replicaInFlight: slot.inFlight,
              concurrency: slot.r.settings.concurrency,
              replicasWithRoom: busy,
              ...(suspect ? { crashes: v.crashes } : {}),
            },
            refs: { replicaId: slot.r.replicaId, agentId: slot.r.agentId! },
          },
        },
        v.lastEvent,
      );
      slot.inFlight++;
      const a = loads.get(slot.r.agentId!) ?? { inFlight: 0, isolated: false };
      a.inFlight++;
      if (suspect) a.isolated = true;
      loads.set(slot.r.agentId!, a);
      if (slots.every((x) => x.inFlight >= x.r.settings.concurrency)) break;
    }
  }
}
