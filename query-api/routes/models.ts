// The models the fabric serves — the registered ones, with their files' fingerprint, their deployment's phase and
// replica levels — and each one's manifest.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { RouteDeps } from '../../http/deps.js';
import { unknownModel } from '../../http/errors.js';
import { parseInput } from '../../http/validate.js';
import { MODEL_KEY } from '../../domain/shared/ids.js';
import { activeReplicas, deploymentPhase } from '../../projections/cluster/queries.js';
import { levelOf } from '../../projections/cluster/state.js';
import { visibleEdits } from '../../projections/models/projection.js';
import { callerOf } from '../../http/access.js';

const keyParams = z.strictObject({
  key: z.string().regex(MODEL_KEY, 'a model key: 1–128 of letters, digits and . _ / -'),
});
const shapeQuery = z.strictObject({
  batch: z.coerce.number().int().min(1).max(1024).optional(),
  sequence: z.coerce.number().int().min(1).max(1_000_000).optional(),
});

export function modelRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;

  app.get('/models', async () => {
    const s = ctx.view.state;
    return {
      models: ctx.catalog.list().map((e) => {
        const levels = { HOT: 0, WARM: 0, COLD: 0 };
        for (const r of activeReplicas(s.cluster, e.key)) levels[levelOf(r.state)]++;
        return {
          key: e.key,
          description: e.description,
          weightsBytes: e.weightsBytes,
          defaults: e.defaults,
          ...(e.registration === undefined
            ? {}
            : {
                fingerprint: e.registration.fingerprint,
                family: e.registration.family,
                architecture: e.registration.architecture,
                generative: e.registration.generative,
                registeredAt: e.registration.registeredAt,
                registeredBy: e.registration.registeredBy,
              }),
          ...(e.disabled === undefined ? {} : { disabled: e.disabled }),
          phase: deploymentPhase(s.cluster, e.key),
          replicas: levels,
        };
      }),
    };
  });

  app.get('/models/:key/manifest', async (req) => {
    const { key } = parseInput(keyParams, req.params, 'params');
    const q = parseInput(shapeQuery, req.query, 'query');
    if (ctx.catalog.get(key) === undefined)
      throw unknownModel(
        key,
        ctx.catalog.list().map((e) => e.key),
      );
    const shape =
      q.batch !== undefined || q.sequence !== undefined
        ? { batch: q.batch ?? 1, sequence: q.sequence ?? 1 }
        : undefined;
    return ctx.catalog.manifest(key, shape);
  });

  // The edits of a model the caller may submit to (public ones, its own private ones; an operator sees all).
  app.get('/models/:key/edits', { config: { access: 'user' as const } }, async (req) => {
    const me = callerOf(req);
    const { key } = parseInput(keyParams, req.params, 'params');
    const m = ctx.view.state.models.byKey.get(key);
    if (m === undefined)
      throw unknownModel(
        key,
        ctx.catalog.list().map((e) => e.key),
      );
    return {
      model: key,
      edits: visibleEdits(m, me.actor, me.tags.operator).map((e) => ({
        variant: e.variant,
        name: e.name,
        fingerprint: e.fingerprint,
        visibility: e.visibility,
        author: e.author,
        registeredAt: e.registeredAt,
        source: e.source,
      })),
    };
  });
}
