// Cluster, queue and agent views, read from the live projection.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { RouteDeps } from '../../http/deps.js';
import { parseInput } from '../../http/validate.js';
import { MODEL_KEY } from '../../domain/shared/ids.js';
import { clusterView } from '../../projections/cluster/queries.js';
import type { AgentHealth } from '../../projections/agents/projection.js';
import { queueLength, queueView } from '../../projections/queue/queries.js';

const queueQuery = z.strictObject({ model: z.string().regex(MODEL_KEY, 'a model key').optional(), limit: z.coerce.number().int().min(1).max(1000).optional() });

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function health(h: AgentHealth | undefined) {
  if (h === undefined) return null;
  return { state: h.state, since: iso(h.sinceMs), lastSeenAt: iso(h.lastSeenAtMs), graceUntil: iso(h.graceUntilMs), lapses: h.lapses, returns: h.returns, restarts: h.restarts };
}

export function clusterRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;

  app.get('/cluster', async () => {
    const s = ctx.view.state;
    const c = clusterView(s.cluster);
    return {
      asOf: s.position,
      agents: c.agents.map((a) => ({ ...a, health: health(s.agents.byId.get(a.agentId)) })),
      gpus: c.gpus,
      deployments: c.deployments.map((d) => ({ ...d, queueLength: queueLength(s.queue, d.modelKey) })),
      totals: s.requests.totals,
    };
  });

  app.get('/queue', async (req) => {
    const q = parseInput(queueQuery, req.query, 'query');
    const s = ctx.view.state;
    const models = q.model !== undefined ? [q.model] : [...s.queue.byModel.keys()].filter((k) => queueLength(s.queue, k) > 0).sort();
    return { asOf: s.position, queues: models.map((model) => ({ model, length: queueLength(s.queue, model), entries: queueView(s.queue, model, q.limit ?? 100) })) };
  });

  app.get('/agents', async () => {
    const s = ctx.view.state;
    return {
      asOf: s.position,
      agents: [...s.cluster.agents.values()].map((a) => ({ agentId: a.agentId, state: a.state, bootId: a.bootId, gpus: a.gpus, ramBytes: a.ramBytes, cpuCacheBudgetBytes: a.cpuCacheBudgetBytes, health: health(s.agents.byId.get(a.agentId)) })),
    };
  });
}
