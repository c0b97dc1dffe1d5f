// What the status page shows, in one answer (GET /live): per model its phase, replicas with their levels, its
// queue in serving order and the requests running on it with their phase timelines; the agents and GPUs; the
// recent evictions and requeues with why they happened. All of it as of one position of the live view (the
// timelines and causes are read from the log up to at least that position).
import type { Identity } from '../../auth/keys.js';
import type { FabricContext } from '../../fabric/context.js';
import { activeReplicas, clusterView, deploymentPhase } from '../../projections/cluster/queries.js';
import { levelOf } from '../../projections/cluster/state.js';
import { queueLength, queueView } from '../../projections/queue/queries.js';
import { mayRead } from '../ws/connection.js';
import type { ChangeExplained, ChangeExplainer } from './explain.js';
import type { RecentChanges } from './recent-changes.js';
import type { TimelineEntry, Timelines } from './timeline.js';

const QUEUE_SHOWN = 50;

export interface LiveRunning {
  requestId: string;
  status: string;
  attempt: number;
  replicaId: string | null;
  agentId: string | null;
  /** Shown to its own key and to operators only. */
  submitter: string | null;
  timeline: TimelineEntry[];
}

export interface LiveModel {
  model: string;
  phase: string;
  pinned: boolean;
  replicas: { replicaId: string; state: string; level: 'HOT' | 'WARM' | 'COLD'; agentId: string | null; gpus: number[] }[];
  queueLength: number;
  queue: { position: number; requestId: string; priority: boolean; requeued: boolean; enqueuedAt: string }[];
  running: LiveRunning[];
  lastFailure: string | null;
}

export interface LivePage {
  asOf: number;
  /** The server's clock (ms): a running phase lasts until now. */
  now: number;
  models: LiveModel[];
  agents: ReturnType<typeof clusterView>['agents'];
  gpus: ReturnType<typeof clusterView>['gpus'];
  changes: ChangeExplained[];
}

export interface LiveParts {
  recent: RecentChanges;
  explainer: ChangeExplainer;
  timelines: Timelines;
}

export async function liveSnapshot(ctx: FabricContext, parts: LiveParts, me: Identity): Promise<LivePage> {
  const s = ctx.view.state;
  const c = clusterView(s.cluster);
  const keys = new Set([...s.cluster.deployments.keys(), ...[...s.queue.byModel.keys()].filter((k) => queueLength(s.queue, k) > 0)]);
  const running = new Set<string>();
  const models: LiveModel[] = [];
  for (const model of [...keys].sort()) {
    const dep = s.cluster.deployments.get(model);
    const replicas = activeReplicas(s.cluster, model);
    const runs: LiveRunning[] = [];
    for (const r of replicas) {
      for (const id of s.requests.inFlightByReplica.get(r.replicaId) ?? []) {
        const v = s.requests.byId.get(id);
        if (v === undefined) continue;
        running.add(id);
        runs.push({
          requestId: id,
          status: v.status,
          attempt: v.attempt,
          replicaId: v.replicaId,
          agentId: v.agentId,
          submitter: mayRead(me, v.submitter) ? v.submitter : null,
          timeline: await parts.timelines.of(id, v.lastEvent.position),
        });
      }
    }
    models.push({
      model,
      phase: deploymentPhase(s.cluster, model),
      pinned: dep?.pinned ?? false,
      replicas: replicas.map((r) => ({ replicaId: r.replicaId, state: r.state, level: levelOf(r.state), agentId: r.agentId, gpus: r.gpus })),
      queueLength: queueLength(s.queue, model),
      queue: queueView(s.queue, model, QUEUE_SHOWN),
      running: runs,
      lastFailure: dep?.lastFailure?.text ?? null,
    });
  }
  parts.timelines.retain(running);
  const changes = await Promise.all((await parts.recent.list()).map((e) => parts.explainer.explain(e)));
  return { asOf: s.position, now: ctx.clock(), models, agents: c.agents, gpus: c.gpus, changes };
}
