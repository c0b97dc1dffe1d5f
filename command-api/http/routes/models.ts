// Operators' catalog routes: register a model folder (POST /models: the folder is inspected, its files'
// fingerprint recorded as ModelRegistered), remove a model (refused while it is deployed), and disable / enable
// one (ModelDisabled with the operator's reason / ModelEnabled: taking it offline and back). The list and each
// model's manifest are read routes of the query API (GET /models).
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../../http/access.js';
import type { RouteDeps } from '../../../http/deps.js';
import { nowIso } from '../../../http/deps.js';
import { parseInput } from '../../../http/validate.js';
import { registerModelFolder } from '../../../catalog/register.js';
import { entryOf } from '../../../catalog/registered.js';
import { activeReplicas } from '../../../projections/cluster/queries.js';
import { commandIdOf, metaOf } from '../meta.js';
import {
  disableModelSchema,
  enableModelSchema,
  registerEditSchema,
  registerModelSchema,
  removeEditSchema,
  removeModelSchema,
} from '../schemas.js';
import { createHash } from 'node:crypto';
import { checkBlockSource } from '../submit/block-check.js';

const operator = { config: { access: 'operator' as const } };

export function modelCommandRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;

  app.post('/models', operator, async (req, reply) => {
    const me = callerOf(req);
    const b = parseInput(registerModelSchema, req.body ?? {}, 'body');
    const { outcome, facts } = await registerModelFolder(
      { local: ctx.localModels, commands: ctx.commands, view: ctx.view },
      {
        key: b.model,
        dir: b.dir,
        replace: b.replace ?? false,
        actor: me.actor,
        commandId: commandIdOf(req, me, ctx),
        at: nowIso(ctx),
      },
    );
    if (outcome.position !== undefined) await ctx.view.waitForPosition(outcome.position, 10_000);
    const m = ctx.view.state.models.byKey.get(b.model);
    return reply.code(outcome.events.length > 0 ? 201 : 200).send({
      model: b.model,
      registered: outcome.events.length > 0,
      fingerprint: facts.fingerprint,
      entry:
        m === undefined
          ? null
          : {
              ...entryOf(m),
              files: m.files,
              inputs: m.inputs,
              outputs: m.outputs,
              moduleCount: m.moduleCount,
              padding: m.padding,
            },
      logPosition: outcome.position ?? null,
    });
  });

  app.post('/models/remove', operator, async (req) => {
    const me = callerOf(req);
    const b = parseInput(removeModelSchema, req.body ?? {}, 'body');
    const out = await ctx.commands.execute(
      {
        type: 'RemoveModel',
        modelKey: b.model,
        actor: me.actor,
        deployedReplicas: activeReplicas(ctx.view.state.cluster, b.model).length,
      },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    if (out.position !== undefined) await ctx.view.waitForPosition(out.position, 10_000);
    return { model: b.model, removed: out.events.length > 0, logPosition: out.position ?? null };
  });

  app.post('/models/disable', operator, async (req) => {
    const me = callerOf(req);
    const b = parseInput(disableModelSchema, req.body ?? {}, 'body');
    const out = await ctx.commands.execute(
      { type: 'DisableModel', modelKey: b.model, actor: me.actor, reason: b.reason },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    if (out.position !== undefined) await ctx.view.waitForPosition(out.position, 10_000);
    return { model: b.model, disabled: true, changed: out.events.length > 0, logPosition: out.position ?? null };
  });

  app.post('/models/enable', operator, async (req) => {
    const me = callerOf(req);
    const b = parseInput(enableModelSchema, req.body ?? {}, 'body');
    const out = await ctx.commands.execute(
      { type: 'EnableModel', modelKey: b.model, actor: me.actor },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    if (out.position !== undefined) await ctx.view.waitForPosition(out.position, 10_000);
    return { model: b.model, disabled: false, changed: out.events.length > 0, logPosition: out.position ?? null };
  });

  // Persistent edits (nnsight's model.edit()): any key registers private ones (only it may submit to the variant), an
  // operator public ones; the source is compiled (never run) here, as a block is at submission.
  const user = { config: { access: 'user' as const } };
  app.post('/models/edits', user, async (req, reply) => {
    const me = callerOf(req);
    const b = parseInput(registerEditSchema, req.body ?? {}, 'body');
    checkBlockSource(b.source, 'shared');
    const fingerprint = createHash('sha256').update(b.source, 'utf8').digest('hex');
    const out = await ctx.commands.execute(
      {
        type: 'RegisterModelEdit',
        modelKey: b.model,
        name: b.name,
        source: b.source,
        fingerprint,
        visibility: b.visibility ?? 'private',
        actor: me.actor,
        operator: me.tags.operator,
      },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    if (out.position !== undefined) await ctx.view.waitForPosition(out.position, 10_000);
    return reply.code(out.events.length > 0 ? 201 : 200).send({
      variant: `${b.model}@${b.name}`,
      fingerprint,
      visibility: b.visibility ?? 'private',
      registered: out.events.length > 0,
      logPosition: out.position ?? null,
    });
  });

  app.post('/models/edits/remove', user, async (req) => {
    const me = callerOf(req);
    const b = parseInput(removeEditSchema, req.body ?? {}, 'body');
    const out = await ctx.commands.execute(
      { type: 'RemoveModelEdit', modelKey: b.model, name: b.name, actor: me.actor, operator: me.tags.operator },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    if (out.position !== undefined) await ctx.view.waitForPosition(out.position, 10_000);
    return { variant: `${b.model}@${b.name}`, removed: out.events.length > 0, logPosition: out.position ?? null };
  });
}
