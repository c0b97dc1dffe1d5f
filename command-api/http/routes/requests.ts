// Users' routes: submit a request, cancel one (an operator cancels any: a kill).
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../../http/access.js';
import type { RouteDeps } from '../../../http/deps.js';
import { parseInput } from '../../../http/validate.js';
import { commandIdOf, metaOf } from '../meta.js';
import { idParams, noBody } from '../schemas.js';
import { submitSchema } from '../submit/schema.js';
import { submit } from '../submit/submit.js';

export function requestRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;

  app.post('/requests', async (req, reply) => {
    const me = callerOf(req);
    const body = parseInput(submitSchema, req.body ?? {}, 'body');
    const answer = await submit(deps, me, body);
    return reply.code(answer.existing ? 200 : 202).send(answer);
  });

  app.post('/requests/:id/cancel', async (req) => {
    const me = callerOf(req);
    const { id } = parseInput(idParams, req.params, 'params');
    parseInput(noBody, req.body, 'body');
    const out = await ctx.commands.execute({ type: 'CancelRequest', requestId: id, actor: me.actor, operator: me.tags.operator }, metaOf(ctx, me, commandIdOf(req, me, ctx), id));
    return { requestId: id, cancelled: true, alreadyCancelled: out.events.length === 0 };
  });
}
