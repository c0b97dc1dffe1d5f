// Cluster, queue and agent views, read from the live projection. Operators see everything; other keys see their
// own requests and aggregate counts only (queue lengths, replica and GPU totals), never another key's request
// ids nor the agents.
import { unknownModel } from '../../http/errors.js';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { RouteDeps } from '../../http/deps.js';
import { callerOf } from '../../http/access.js';
import { displayRequestId } from '../../http/request-ids.js';
import { runningBySubmitter, truePosition } from '../../projections/control-plane/positions.js';
import { parseInput } from '../../http/validate.js';
import { MODEL_KEY } from '../../domain/shared/ids.js';
import { clusterView } from '../../projections/cluster/queries.js';
import type { AgentHealth } from '../../projections/agents/projection.js';
import { queueLength, queueView, submitterQueueView } from '../../projections/queue/queries.js';
import { seesAll } from '../ws/connection.js';
import type { ProcessFault } from '../../fabric/context.js';

const queueQuery = z.strictObject({
  model: z.string().regex(MODEL_KEY, 'a model key').optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
});

/** Operators, and the only caller when auth is off. */

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function health(h: AgentHealth | undefined) {
  if (h === undefined) return null;
  return {
    state: h.state,
    since: iso(h.sinceMs),
    lastSeenAt: iso(h.lastSeenAtMs),
    graceUntil: iso(h.graceUntilMs),
    lapses: h.lapses,
    returns: h.returns,
    restarts: h.restarts,
  };
}

interface AgentRow {
  agentId: string;
  state: string;
  bootId: string;
  gpus: unknown[];
  ramBytes: number;
  cpuCacheBudgetBytes: number;
}

/**
 * The operator's agent rows with the faults of the processes this fabric supervises: an agent that refused its
 * configuration after it last registered shows FAULTED with the fault (not the state its last boot left); one that
 * never registered gets a row of its own.
 */
function withFaults<R extends AgentRow>(
  rows: R[],
  faults: ProcessFault[],
  registeredAt: (agentId: string) => number | undefined,
  empty: (f: ProcessFault) => R,
): (R & { fault?: Omit<ProcessFault, 'process' | 'agentId'> })[] {
  const out: (R & { fault?: Omit<ProcessFault, 'process' | 'agentId'> })[] = [...rows];
  for (const f of faults) {
    const fault = { code: f.code, message: f.message, at: f.at };
    const i = out.findIndex((r) => r.agentId === f.agentId);
    if (i < 0) out.push({ ...empty(f), state: 'FAULTED', fault });
    else if ((registeredAt(f.agentId) ?? 0) <= Date.parse(f.at)) out[i] = { ...out[i]!, state: 'FAULTED', fault };
  }
  return out;
}

export function clusterRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;
  const faults = () => ctx.processFaults?.() ?? [];
  const registeredAt = (agentId: string) => ctx.view.state.agents.byId.get(agentId)?.registeredAtMs;
  const empty = (f: ProcessFault) => ({
    agentId: f.agentId,
    state: 'FAULTED',
    bootId: '-',
    gpus: [],
    ramBytes: 0,
    cpuCacheBudgetBytes: 0,
    restarts: 0,
    health: null,
  });

  app.get('/cluster', async (req) => {
    const me = callerOf(req);
    // Read your writes: what was acknowledged before this read (a deploy's replicas) is in it. Best effort: a view
    // that does not get there within readyTimeoutMs answers as of where it is (`asOf`).
    await ctx.view.catchUp(deps.config.readyTimeoutMs).catch(() => undefined);
    const s = ctx.view.state;
    const c = clusterView(s.cluster);
    if (!seesAll(me)) {
      return {
        asOf: s.position,
        agents: [],
        gpus: [],
        summary: {
          agents: c.agents.length,
          activeAgents: c.agents.filter((a) => a.state === 'ACTIVE').length,
          gpus: c.gpus.length,
          gpuMemoryBytes: c.gpus.reduce((n, g) => n + g.memoryBytes, 0),
        },
        deployments: c.deployments.map((d) => ({
          modelKey: d.modelKey,
          phase: d.phase,
          replicas: d.replicas.map((r) => ({ replicaId: r.replicaId, state: r.state, level: r.level })),
          queueLength: queueLength(s.queue, d.modelKey),
        })),
        totals: s.requests.totals,
      };
    }
    const f = faults();
    return {
      asOf: s.position,
      agents: withFaults(
        c.agents.map((a) => ({ ...a, state: a.state as string, health: health(s.agents.byId.get(a.agentId)) })),
        f,
        registeredAt,
        empty,
      ),
      faults: f,
      ...(ctx.controlPlaneRestarts === undefined ? {} : { controlPlane: ctx.controlPlaneRestarts() }),
      gpus: c.gpus,
      deployments: c.deployments.map((d) => ({ ...d, queueLength: queueLength(s.queue, d.modelKey) })),
      totals: s.requests.totals,
    };
  });

  app.get('/queue', async (req) => {
    const me = callerOf(req);
    const q = parseInput(queueQuery, req.query, 'query');
    const s = ctx.view.state;
    // A key that is neither served nor queued is a typo, not an empty queue.
    if (q.model !== undefined && ctx.catalog.get(q.model) === undefined && queueLength(s.queue, q.model) === 0)
      throw unknownModel(
        q.model,
        ctx.catalog.list().map((e) => e.key),
      );
    const models =
      q.model !== undefined ? [q.model] : [...s.queue.byModel.keys()].filter((k) => queueLength(s.queue, k) > 0).sort();
    const running = runningBySubmitter(s.requests);
    const limit = q.limit ?? 100;
    const entries = (model: string) => {
      // Positions as dispatch will take them (a key at its running limit is passed over).
      if (seesAll(me))
        return queueView(s.queue, model, limit).map((e) => ({
          ...e,
          position: truePosition(s, e.requestId, running) ?? e.position,
        }));
      return submitterQueueView(s.queue, model, me.actor, limit).map((e) => ({
        position: truePosition(s, e.requestId, running) ?? null,
        requestId: displayRequestId(me, e.requestId),
        rank: e.rank,
        priority: e.priority,
        requeued: e.requeued,
        enqueuedAt: e.enqueuedAt,
      }));
    };
    return {
      asOf: s.position,
      queues: models.map((model) => ({ model, length: queueLength(s.queue, model), entries: entries(model) })),
    };
  });

  app.get('/agents', { config: { access: 'operator' } }, async () => {
    const s = ctx.view.state;
    const f = faults();
    return {
      asOf: s.position,
      agents: withFaults(
        [...s.cluster.agents.values()].map((a) => ({
          agentId: a.agentId,
          state: a.state as string,
          bootId: a.bootId,
          gpus: a.gpus,
          ramBytes: a.ramBytes,
          cpuCacheBudgetBytes: a.cpuCacheBudgetBytes,
          health: health(s.agents.byId.get(a.agentId)),
        })),
        f,
        registeredAt,
        empty,
      ),
      faults: f,
    };
  });
}
