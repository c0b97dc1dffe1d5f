// Agent rules: a heartbeat lapse makes an agent UNRESPONSIVE (waited for through a grace period, nothing is
// requeued); an expired grace makes it LOST (its in-flight requests are requeued AGENT_LOST, its replicas
// removed); a new boot (a restart) requeues what was in flight AGENT_RESTARTED and loads its replicas again;
// a draining agent finishes its in-flight requests, then its replicas move elsewhere and the drain completes.
import type { ClusterAgent, ClusterReplica } from '../../projections/cluster/state.js';
import type { PlanContext } from '../plan-context.js';
import { byId, inFlightOn, replicasOnAgent } from '../view-queries.js';
import { requeueInFlight } from './requeue.js';

export function agentHealthRule(ctx: PlanContext): void {
  if (!ctx.input.tick) return;
  const { heartbeats, startedAtMs, config } = ctx.input;
  const lastSeenOf = (a: ClusterAgent, sinceMs: number): number => {
    const hb = heartbeats.get(a.agentId);
    const lastSeen = Math.max(startedAtMs, sinceMs, a.registeredAtMs);
    return hb !== undefined && hb.bootId === a.bootId ? Math.max(lastSeen, hb.atMs) : lastSeen;
  };
  // Every agent is checked (a comparison each); only the few that are due are sorted (commands in agent order).
  const due: ClusterAgent[] = [];
  for (const a of ctx.state.cluster.agents.values()) {
    const health = ctx.state.agents.byId.get(a.agentId);
    if (health === undefined) continue;
    if (a.state === 'ACTIVE' || a.state === 'DRAINING') {
      if (ctx.now - lastSeenOf(a, health.sinceMs) > config.heartbeatTimeoutMs) due.push(a);
    } else if (a.state === 'UNRESPONSIVE' && health.graceUntilMs !== null && ctx.now >= health.graceUntilMs) {
      due.push(a);
    }
  }
  for (const a of due.sort(byId((x) => x.agentId))) {
    const health = ctx.state.agents.byId.get(a.agentId)!;
    if (a.state === 'ACTIVE' || a.state === 'DRAINING') {
      const lastSeen = lastSeenOf(a, health.sinceMs);
      ctx.emit(
        `sched:unresponsive:${a.agentId}:${a.bootId}:${health.lapses + 1}`,
        {
          type: 'MarkAgentUnresponsive',
          agentId: a.agentId,
          bootId: a.bootId,
          lastSeenAt: new Date(lastSeen).toISOString(),
          timeoutMs: config.heartbeatTimeoutMs,
          graceMs: config.agentGraceMs,
        },
        a.lastEvent,
      );
    } else {
      ctx.emit(
        `sched:lost:${a.agentId}:${a.bootId}:${health.lapses}`,
        { type: 'MarkAgentLost', agentId: a.agentId, bootId: a.bootId },
        a.lastEvent,
      );
    }
  }
}

/** The death as evidence: the boot that died, the one that replaced it (null: lost), how it ended if reported. */
function crashOf(agent: ClusterAgent, diedBootId: string, reason: 'AGENT_LOST' | 'AGENT_RESTARTED') {
  if (reason === 'AGENT_LOST') return { agentId: agent.agentId, bootId: diedBootId, nextBootId: null, exit: null };
  const exit = agent.previousExit !== null && agent.previousExit.bootId === diedBootId ? agent.previousExit : null;
  return { agentId: agent.agentId, bootId: diedBootId, nextBootId: agent.bootId, exit };
}

function requeueAll(
  ctx: PlanContext,
  r: ClusterReplica,
  reason: 'AGENT_LOST' | 'AGENT_RESTARTED',
  text: string,
  agent: ClusterAgent,
  diedBootId: string,
): void {
  const cause = agent.lastEvent;
  requeueInFlight(
    ctx,
    r.replicaId,
    reason,
    (v) => ({
      rule: `requeue-${reason.toLowerCase().replace(/_/g, '-')}`,
      text: `attempt ${v.attempt} on replica ${r.replicaId}: ${text}`,
      refs: { replicaId: r.replicaId, agentId: r.agentId ?? '', causeEvent: cause.type },
    }),
    cause,
    crashOf(agent, diedBootId, reason),
  );
}

export function agentLossRule(ctx: PlanContext): void {
  const releases = new Map<
    string,
    { modelKey: string; agent: ClusterAgent; reason: 'AGENT_LOST' | 'AGENT_RESTARTED'; previousBootId: string }
  >();
  // Only agents the cluster index marks (LOST with replicas, or replicas on an older boot), not every replica.
  const { attention, onAgent } = ctx.state.cluster.index;
  const replicas: ClusterReplica[] = [];
  for (const agentId of attention)
    for (const id of onAgent.get(agentId) ?? []) replicas.push(ctx.state.cluster.replicas.get(id)!);
  replicas.sort(byId((r) => r.replicaId));
  for (const r of replicas) {
    const agent = ctx.state.cluster.agents.get(r.agentId!);
    if (agent === undefined) continue;
    if (agent.state === 'LOST') {
      const health = ctx.state.agents.byId.get(agent.agentId);
      requeueAll(
        ctx,
        r,
        'AGENT_LOST',
        `agent ${agent.agentId} was lost (no heartbeat since ${new Date(health?.lastSeenAtMs ?? 0).toISOString()}, grace expired)`,
        agent,
        agent.bootId,
      );
      releases.set(`${r.modelKey}|${agent.agentId}|LOST`, {
        modelKey: r.modelKey,
        agent,
        reason: 'AGENT_LOST',
        previousBootId: agent.bootId,
      });
    } else if (r.bootId !== null && r.bootId !== agent.bootId) {
      requeueAll(
        ctx,
        r,
        'AGENT_RESTARTED',
        `agent ${agent.agentId} restarted (boot ${r.bootId} → ${agent.bootId}); the attempt died with the old process`,
        agent,
        r.bootId,
      );
      releases.set(`${r.modelKey}|${agent.agentId}|RESTARTED|${r.bootId}`, {
        modelKey: r.modelKey,
        agent,
        reason: 'AGENT_RESTARTED',
        previousBootId: r.bootId,
      });
    }
  }
  for (const { modelKey, agent, reason, previousBootId } of releases.values()) {
    const text =
      reason === 'AGENT_LOST'
        ? `agent ${agent.agentId} is LOST: its replicas of ${modelKey} are removed`
        : `agent ${agent.agentId} restarted (boot ${previousBootId} → ${agent.bootId}): its replicas of ${modelKey} load again, its cached copies are gone`;
    ctx.emit(
      `sched:release:${modelKey}:${agent.agentId}:${reason}:${previousBootId}:${agent.bootId}`,
      {
        type: 'ReleaseAgentReplicas',
        modelKey,
        agentId: agent.agentId,
        reason,
        previousBootId,
        bootId: agent.bootId,
        because: {
          rule: reason === 'AGENT_LOST' ? 'agent-lost' : 'agent-restarted',
          text,
          refs: { agentId: agent.agentId },
        },
      },
      agent.lastEvent,
    );
  }
}

export function drainRule(ctx: PlanContext): void {
  for (const agentId of [...ctx.state.cluster.index.draining].sort()) {
    const a = ctx.state.cluster.agents.get(agentId)!;
    if (a.state !== 'DRAINING') continue;
    const replicas = replicasOnAgent(ctx.state, a.agentId);
    const inFlight = replicas.reduce((n, r) => n + inFlightOn(ctx.state, r.replicaId).length, 0);
    if (inFlight > 0) continue;
    if (replicas.length === 0) {
      ctx.emit(
        `sched:drained:${a.agentId}:${a.lastEvent.id}`,
        { type: 'CompleteAgentDrain', agentId: a.agentId },
        a.lastEvent,
      );
      continue;
    }
    for (const r of replicas) {
      if (r.state === 'UNLOADING' || r.state === 'DEMOTING' || ctx.touchedReplicas.has(r.replicaId)) continue;
      ctx.touchedReplicas.add(r.replicaId);
      ctx.emit(
        `sched:drain:${r.replicaId}:${a.lastEvent.id}`,
        {
          type: 'EvictReplica',
          replicaId: r.replicaId,
          reason: 'AGENT_DRAINED',
          force: true,
          replace: r.state !== 'WARM',
          because: {
            rule: 'agent-drain',
            text: `agent ${a.agentId} is draining and has no request in flight: replica ${r.replicaId} (${r.state}) moves off it`,
            refs: { agentId: a.agentId },
          },
        },
        a.lastEvent,
      );
    }
  }
}
