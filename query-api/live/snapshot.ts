// What the status page shows, in one answer (GET /live): per model its phase, replicas with their levels, its
// queue in serving order and the requests running on it with their phase timelines; the agents and GPUs; the
// recent evictions and requeues with why they happened. All of it as of one position of the live view (the
// timelines and causes are read from the log up to at least that position). As GET /cluster and /queue: an
// operator (or the one caller with auth off) sees everything; another key sees its own requests (queued, running,
// requeued) under the ids it knows them by, replicas without their agents, evictions without their causes (they
// name other keys), and no agents or GPUs.
import type { Identity } from '../../auth/keys.js';
import type { FabricContext } from '../../fabric/context.js';
import { activeReplicas, clusterView, currentFailure, deploymentPhase } from '../../projections/cluster/queries.js';
import { levelOf } from '../../projections/cluster/state.js';
import { queueLength, queueView, submitterQueueView } from '../../projections/queue/queries.js';
import { mayRead, seesAll } from '../ws/connection.js';
import { displayRequestId } from '../../http/request-ids.js';
import { runningBySubmitter, truePosition } from '../../projections/control-plane/positions.js';
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
  submitter: string;
  timeline: TimelineEntry[];
}

export interface LiveModel {
  model: string;
  phase: string;
  pinned: boolean;
  replicas: {
    replicaId: string;
    state: string;
    level: 'HOT' | 'WARM' | 'COLD';
    agentId: string | null;
    gpus: number[];
  }[];
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
  const all = seesAll(me);
  const s = ctx.view.state;
  const c = clusterView(s.cluster);
  const keys = new Set([
    ...s.cluster.deployments.keys(),
    ...[...s.queue.byModel.keys()].filter((k) => queueLength(s.queue, k) > 0),
  ]);
  const running = new Set<string>();
  const runningByKey = runningBySubmitter(s.requests);
  const models: LiveModel[] = [];
  for (const model of [...keys].sort()) {
    const dep = s.cluster.deployments.get(model);
    const replicas = activeReplicas(s.cluster, model);
    const runs: LiveRunning[] = [];
    for (const r of replicas) {
      for (const id of s.requests.inFlightByReplica.get(r.replicaId) ?? []) {
        const v = s.requests.byId.get(id);
        if (v === undefined || !mayRead(me, v.submitter)) continue;
        running.add(id);
        runs.push({
          requestId: displayRequestId(me, id),
          status: v.status,
          attempt: v.attempt,
          replicaId: v.replicaId,
          agentId: all ? v.agentId : null,
          submitter: v.submitter,
          timeline: await parts.timelines.of(id, v.lastEvent.position),
        });
      }
    }
    models.push({
      model,
      phase: deploymentPhase(s.cluster, model),
      pinned: dep?.pinned ?? false,
      replicas: replicas.map((r) => ({
        replicaId: r.replicaId,
        state: r.state,
        level: levelOf(r.state),
        agentId: all ? r.agentId : null,
        gpus: all ? r.gpus : [],
      })),
      queueLength: queueLength(s.queue, model),
      queue: (all ? queueView(s.queue, model, QUEUE_SHOWN) : submitterQueueView(s.queue, model, me.actor, QUEUE_SHOWN))
        // Positions as dispatch will take them (a key at its running limit is passed over), as GET /queue gives them.
        .map((e) => ({
          ...e,
          position: truePosition(s, e.requestId, runningByKey) ?? e.position,
          requestId: displayRequestId(me, e.requestId),
        })),
      running: runs,
      lastFailure: currentFailure(dep)?.text ?? null,
    });
  }
  parts.timelines.retain(running);
  const changes: ChangeExplained[] = [];
  for (const e of await parts.recent.list()) {
    const x = await parts.explainer.explain(e);
    if (all) changes.push(x);
    else if (x.kind !== 'requeue') changes.push({ ...x, causes: [] });
    else {
      const v = s.requests.byId.get(x.subject);
      if (v !== undefined && mayRead(me, v.submitter)) changes.push({ ...x, subject: displayRequestId(me, x.subject) });
    }
  }
  return { asOf: s.position, now: ctx.clock(), models, agents: all ? c.agents : [], gpus: all ? c.gpus : [], changes };
}
