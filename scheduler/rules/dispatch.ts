// Dispatch: the queue heads of each model go to its HOT replicas on ACTIVE agents that have room (in flight <
// the replica's concurrency), every HOT replica considered on every decision, the least busy first. The queue is
// in fair-share order (submitters take turns inside a rank); a submitter already running as many requests as its
// key allows (maxRunning) is passed over until one of them finishes, as the positions users are told assume.
//
// An agent whose trusted block was failed for its time limit and has not stopped yet takes nothing new.
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

/** In flight per agent, from the requests projection's counts, with this round's dispatches added (copied on write). */
function agentLoads(ctx: PlanContext): { get(agentId: string): AgentLoad; mut(agentId: string): AgentLoad } {
  const counts = ctx.state.requests.inFlightByAgent;
  const local = new Map<string, AgentLoad>();
  const get = (agentId: string): AgentLoad => {
    const l = local.get(agentId);
    if (l !== undefined) return l;
    const c = counts.get(agentId);
    return c === undefined ? { inFlight: 0, isolated: false } : { inFlight: c.count, isolated: c.isolated > 0 };
  };
  return {
    get,
    mut(agentId) {
      let l = local.get(agentId);
      if (l === undefined) {
        l = get(agentId);
        local.set(agentId, l);
      }
      return l;
    },
  };
}

function hotSlots(ctx: PlanContext, modelKey: string): Slot[] {
  const s = ctx.state;
  return activeReplicas(s.cluster, modelKey)
    .filter((r) => {
      if (r.state !== 'HOT' || r.agentId === null || ctx.touchedReplicas.has(r.replicaId)) return false;
      const a = s.cluster.agents.get(r.agentId);
      // An agent whose timed-out trusted block may still run takes nothing new (domain/request/run-stop.ts).
      return (
        a !== undefined &&
        a.state === 'ACTIVE' &&
        a.bootId === r.bootId &&
        !s.requests.blockRunningByAgent.has(r.agentId)
      );
    })
    .map((r) => ({ r, inFlight: s.requests.inFlightByReplica.get(r.replicaId)?.size ?? 0 }));
}

const bySlotLoad = (a: Slot, b: Slot): number =>
  a.inFlight / a.r.settings.concurrency - b.inFlight / b.r.settings.concurrency ||
  (a.r.replicaId < b.r.replicaId ? -1 : 1);

/** Slots with room, least busy first (ties: replica id); the top one takes a request, and leaves when full. */
class SlotHeap {
  private readonly h: Slot[] = [];
  constructor(slots: Slot[]) {
    for (const x of slots) this.push(x);
  }
  get size(): number {
    return this.h.length;
  }
  peek(): Slot | undefined {
    return this.h[0];
  }
  /** The top slot took one more request. */
  taken(): void {
    const top = this.h[0];
    if (top === undefined) return;
    if (top.inFlight >= top.r.settings.concurrency) {
      const last = this.h.pop()!;
      if (this.h.length === 0) return;
      this.h[0] = last;
    }
    this.down(0);
  }
  private push(x: Slot): void {
    const h = this.h;
    h.push(x);
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (bySlotLoad(h[i], h[p]) >= 0) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }
  private down(i: number): void {
    const h = this.h;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && bySlotLoad(h[l], h[m]) < 0) m = l;
      if (r < h.length && bySlotLoad(h[r], h[m]) < 0) m = r;
      if (m === i) return;
      [h[i], h[m]] = [h[m], h[i]];
      i = m;
    }
  }
}

export function dispatchRule(ctx: PlanContext): void {
  const s = ctx.state;
  const loads = agentLoads(ctx);
  const load = loads.get;
  let budget = ctx.input.config.maxDispatchesPerRound;
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
    if (budget <= 0) break;
    const slots = hotSlots(ctx, modelKey).filter((x) => x.inFlight < x.r.settings.concurrency);
    if (slots.length === 0) continue;
    const free = slots.reduce((n, x) => n + x.r.settings.concurrency - x.inFlight, 0);
    const queued = queueLength(s.queue, modelKey);
    ctx.running ??= runningBySubmitter(s.requests);
    const running = ctx.running;
    let position = 0;
    let scanned = 0;
    let dispatched = 0;
    let open: SlotHeap | undefined;
    for (const head of s.queue.byModel.get(modelKey)!.entries()) {
      if (++scanned > MAX_SCAN + ctx.touchedRequests.size || dispatched >= free || budget <= 0) break;
      const v = s.requests.byId.get(head.id)!;
      if (isHeld(running.get(v.submitter) ?? 0, v.options.maxRunning)) continue;
      const pos = position++;
      if (ctx.touchedRequests.has(head.id)) continue;
      const suspect = v.crashes > 0;
      let slot: Slot | undefined;
      let busy: number;
      if (suspect) {
        const usable = slots.filter((x) => {
          if (x.inFlight >= x.r.settings.concurrency) return false;
          const a = load(x.r.agentId!);
          const holder = reserved.get(x.r.agentId!);
          if (a.isolated) return false;
          return a.inFlight === 0 && (holder === undefined || holder === v.requestId);
        });
        usable.sort(bySlotLoad);
        slot = usable[0];
        busy = usable.length;
        // The suspect's agent takes nothing else: the other requests' slots are worked out again.
        open = undefined;
      } else {
        // The slots a request that is not a suspect may take, least busy first, as a heap (a round dispatching
        // hundreds of requests to a model with hundreds of replicas does not sort them for each one).
        open ??= new SlotHeap(
          slots.filter(
            (x) => x.inFlight < x.r.settings.concurrency && !load(x.r.agentId!).isolated && !reserved.has(x.r.agentId!),
          ),
        );
        slot = open.peek();
        busy = open.size;
      }
      // A suspect that cannot run alone yet holds its place: those behind it wait (at most one run).
      if (slot === undefined) break;
      ctx.touchedRequests.add(head.id);
      dispatched++;
      budget--;
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
      if (!suspect) open?.taken();
      const a = loads.mut(slot.r.agentId!);
      a.inFlight++;
      if (suspect) a.isolated = true;
    }
  }
}
