// What changed between two replays: agent and replica states (— for absent: not yet there, or removed/failed),
// queue lengths and request totals.
import type { ReplayReport, ReplayTarget } from './replay.js';

export interface ReplayDiff {
  from: ReplayTarget;
  to: ReplayTarget;
  agents: { agentId: string; from: string | null; to: string | null }[];
  replicas: {
    replicaId: string;
    modelKey: string;
    from: string | null;
    to: string | null;
    fromAgent: string | null;
    toAgent: string | null;
  }[];
  queues: { modelKey: string; from: number; to: number }[];
  requests: Record<string, { from: number; to: number }>;
}

export function diffReplays(a: ReplayReport, b: ReplayReport): ReplayDiff {
  const agentsA = new Map(a.cluster.agents.map((x) => [x.agentId, x.state]));
  const agentsB = new Map(b.cluster.agents.map((x) => [x.agentId, x.state]));
  const agents = [...new Set([...agentsA.keys(), ...agentsB.keys()])]
    .sort()
    .map((agentId) => ({ agentId, from: agentsA.get(agentId) ?? null, to: agentsB.get(agentId) ?? null }))
    .filter((x) => x.from !== x.to);
  type R = { modelKey: string; state: string; agentId: string | null };
  const replicasOf = (r: ReplayReport) =>
    new Map<string, R>(
      r.cluster.deployments.flatMap((d) =>
        d.replicas.map((x) => [x.replicaId, { modelKey: d.modelKey, state: x.state, agentId: x.agentId }] as const),
      ),
    );
  const ra = replicasOf(a);
  const rb = replicasOf(b);
  const replicas = [...new Set([...ra.keys(), ...rb.keys()])]
    .sort()
    .map((replicaId) => {
      const x = ra.get(replicaId);
      const y = rb.get(replicaId);
      return {
        replicaId,
        modelKey: (x ?? y)!.modelKey,
        from: x?.state ?? null,
        to: y?.state ?? null,
        fromAgent: x?.agentId ?? null,
        toAgent: y?.agentId ?? null,
      };
    })
    .filter((x) => x.from !== x.to || x.fromAgent !== x.toAgent);
  const qa = new Map(a.queues.map((q) => [q.modelKey, q.length]));
  const qb = new Map(b.queues.map((q) => [q.modelKey, q.length]));
  const queues = [...new Set([...qa.keys(), ...qb.keys()])]
    .sort()
    .map((modelKey) => ({ modelKey, from: qa.get(modelKey) ?? 0, to: qb.get(modelKey) ?? 0 }))
    .filter((x) => x.from !== x.to);
  const requests: Record<string, { from: number; to: number }> = {};
  for (const k of Object.keys(b.requests.totals) as (keyof ReplayReport['requests']['totals'])[])
    requests[k] = { from: a.requests.totals[k], to: b.requests.totals[k] };
  return { from: a.target, to: b.target, agents, replicas, queues, requests };
}
