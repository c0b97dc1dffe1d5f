// Operators' agent route: drain. Agents register, heartbeat and report through the relay, not over HTTP.
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../../http/access.js';
import type { RouteDeps } from '../../../http/deps.js';
import { parseInput } from '../../../http/validate.js';
import { commandIdOf, metaOf } from '../meta.js';
import { idParams, noBody } from '../schemas.js';

export function agentRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;
  app.post('/agents/:id/drain', { config: { access: 'operator' } }, async (req, reply) => {
    const me = callerOf(req);
    const { id } = parseInput(idParams, req.params, 'params');
    parseInput(noBody, req.body, 'body');
    const out = await ctx.commands.execute(
      { type: 'DrainAgent', agentId: id, actor: me.actor },
      metaOf(ctx, me, commandIdOf(req, me, ctx)),
    );
    return reply.code(202).send({ agentId: id, draining: true, logPosition: out.position ?? null });
  });
}
