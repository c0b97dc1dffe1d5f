// Operators' deployment routes: deploy (additive), scale, evict (a model, a replica, or all), pin.
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../../http/access.js';
import type { RouteDeps } from '../../../http/deps.js';
import { invalidInput, modelDisabled, unknownModel } from '../../../http/errors.js';
import { parseInput } from '../../../http/validate.js';
import type { DeploymentSettingsInput } from '../../../domain/deployment/settings.js';
import type { DomainEvent } from '../../../domain/events/types.js';
import { activeReplicas } from '../../../projections/cluster/queries.js';
import { commandIdOf, metaOf } from '../meta.js';
import { deploySchema, evictSchema, pinSchema, scaleSchema } from '../schemas.js';
import { replicaSizing } from '../../../catalog/replica-sizing.js';

const operator = { config: { access: 'operator' as const } };

function replicaIdsOf(events: DomainEvent[], type: string): string[] {
  return events.filter((e) => e.type === type).map((e) => (e.data as { replicaId: string }).replicaId);
}

function definedOnly<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

export function deploymentRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;

  app.post('/deployments', operator, async (req, reply) => {
    const me = callerOf(req);
    const b = parseInput(deploySchema, req.body ?? {}, 'body');
    const entry = ctx.catalog.get(b.model);
    if (entry === undefined)
      throw unknownModel(
        b.model,
        ctx.catalog.list().map((e) => e.key),
      );
    if (entry.disabled !== undefined) throw modelDisabled(b.model, entry.disabled);
    // int8 / int4: the replica quantizes the weights at load and is sized from the quantized bytes.
    const sized = replicaSizing(entry, b.dtype, b.gradients === true);
    const settings: DeploymentSettingsInput = definedOnly({
      weightsBytes: sized.weightsBytes,
      gpus: b.gpus ?? entry.defaults.gpus,
      dtype: b.dtype ?? entry.defaults.dtype,
      paddingFactor: b.paddingFactor ?? entry.defaults.paddingFactor,
      biasBytes: b.biasBytes ?? entry.defaults.biasBytes,
      // The model's default size applies only when the operator sets none of what a size is made of.
      sizeBytes:
        b.sizeBytes ?? (b.paddingFactor === undefined && b.biasBytes === undefined ? sized.sizeBytes : undefined),
      timeoutMs: b.timeoutMs,
      concurrency: b.concurrency,
      minDeploymentMs: b.minDeploymentMs,
      autoscale: b.autoscale === undefined ? undefined : definedOnly(b.autoscale),
    });
    const out = await ctx.commands.execute(
      definedOnly({
        type: 'RequestDeployment' as const,
        modelKey: b.model,
        settings,
        replicas: b.replicas ?? 1,
        onDemand: false,
        pinned: b.pinned,
        force: b.force,
      }),
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    return reply.code(202).send({
      model: b.model,
      replicaIds: replicaIdsOf(out.events, 'ReplicaRequested'),
      logPosition: out.position ?? null,
    });
  });

  app.post('/deployments/scale', operator, async (req, reply) => {
    const me = callerOf(req);
    const b = parseInput(scaleSchema, req.body ?? {}, 'body');
    const disabled = ctx.catalog.get(b.model)?.disabled;
    if (disabled !== undefined && b.replicas > 0) throw modelDisabled(b.model, disabled);
    const out = await ctx.commands.execute(
      { type: 'ScaleDeployment', modelKey: b.model, replicas: b.replicas },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    return reply.code(202).send({
      model: b.model,
      replicas: b.replicas,
      replicaIds: replicaIdsOf(out.events, 'ReplicaRequested'),
      evicting: [
        ...replicaIdsOf(out.events, 'ReplicaEvictionRequested'),
        ...replicaIdsOf(out.events, 'ReplicaRemoved'),
      ],
      logPosition: out.position ?? null,
    });
  });

  app.post('/deployments/evict', operator, async (req, reply) => {
    const me = callerOf(req);
    const b = parseInput(evictSchema, req.body ?? {}, 'body');
    const given = [b.model, b.replica, b.all].filter((v) => v !== undefined).length;
    if (given !== 1)
      throw invalidInput('body', [{ path: '', message: 'give exactly one of "model", "replica" or "all": true' }]);
    const base = commandIdOf(req, me, ctx);
    let position: number | null = null;
    const evicted: string[] = [];
    if (b.replica !== undefined) {
      const out = await ctx.commands.execute(
        {
          type: 'EvictReplica',
          replicaId: b.replica,
          reason: 'OPERATOR',
          force: true,
          replace: false,
          because: { rule: 'operator-evict', text: `${me.actor} evicted ${b.replica}`, refs: { actor: me.actor } },
        },
        metaOf(ctx, me, base),
      );
      position = out.position ?? null;
      evicted.push(b.replica);
    } else {
      const models =
        b.model !== undefined
          ? [b.model]
          : [...ctx.view.state.cluster.deployments.keys()]
              .filter((k) => activeReplicas(ctx.view.state.cluster, k).length > 0)
              .sort();
      for (const model of models) {
        const out = await ctx.commands.execute(
          { type: 'EvictDeployment', modelKey: model, actor: me.actor },
          metaOf(ctx, me, models.length === 1 && b.model !== undefined ? base : `${base}:${model}`),
        );
        position = out.position ?? position;
        evicted.push(model);
      }
    }
    return reply.code(202).send({ evicted, logPosition: position });
  });

  app.post('/deployments/pin', operator, async (req) => {
    const me = callerOf(req);
    const b = parseInput(pinSchema, req.body ?? {}, 'body');
    const out = await ctx.commands.execute(
      { type: 'PinDeployment', modelKey: b.model, pinned: b.pinned, actor: me.actor },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    return { model: b.model, pinned: b.pinned, logPosition: out.position ?? null };
  });
}
