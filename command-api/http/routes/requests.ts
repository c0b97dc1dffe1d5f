// Users' routes: submit a request, cancel one (an operator cancels any: a kill), delete a kept result. Ids are
// the caller's own (http/request-ids.ts).
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../../http/access.js';
import type { RouteDeps } from '../../../http/deps.js';
import { parseInput } from '../../../http/validate.js';
import { resolveRequestId, scopedRequestId } from '../../../http/request-ids.js';
import { requestStatus } from '../../../projections/control-plane/status.js';
import { asRequestOf } from '../request-errors.js';
import { commandIdOf, metaOf } from '../meta.js';
import { idParams, noBody, submitQuery } from '../schemas.js';
import { SUBMIT_WAIT_MAX_MS, waitForFinal } from '../submit/final-wait.js';
import { submitSchema } from '../submit/schema.js';
import { submit } from '../submit/submit.js';

const submitQuerySchema = submitQuery(SUBMIT_WAIT_MAX_MS);

export function requestRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;

  app.post('/requests', async (req, reply) => {
    const me = callerOf(req);
    const { waitMs } = parseInput(submitQuerySchema, req.query ?? {}, 'query');
    const body = parseInput(submitSchema, req.body ?? {}, 'body');
    const answer = await submit(deps, me, body);
    const code = answer.existing ? 200 : 202;
    if (waitMs === undefined) return reply.code(code).send(answer);
    const recordedId = scopedRequestId(me, answer.requestId);
    // Waiting holds a socket and a listener, not work: the key's other calls may use the slot meanwhile.
    req.freeSlot?.();
    const final = await waitForFinal(deps, recordedId, answer.requestId, answer.existing, waitMs, (cancel) =>
      reply.raw.once('close', cancel),
    );
    // Not finished: where it is now.
    const status = final?.status ?? requestStatus(ctx.view.state, recordedId)?.status;
    return reply.code(code).send({ ...answer, status: status ?? answer.status, final });
  });

  app.post('/requests/:id/cancel', async (req) => {
    const me = callerOf(req);
    const { id } = parseInput(idParams, req.params, 'params');
    parseInput(noBody, req.body, 'body');
    const requestId = await resolveRequestId(ctx, me, id);
    const out = await asRequestOf(id, () =>
      ctx.commands.execute(
        { type: 'CancelRequest', requestId, actor: me.actor, operator: me.tags.operator },
        metaOf(ctx, me, commandIdOf(req, me, ctx), requestId),
      ),
    );
    return { requestId: id, cancelled: true, alreadyCancelled: out.events.length === 0 };
  });

  // The submitter (or an operator) deletes a kept result: its bytes stop counting against the key's quota.
  app.delete('/requests/:id/result', async (req) => {
    const me = callerOf(req);
    const { id } = parseInput(idParams, req.params, 'params');
    const requestId = await resolveRequestId(ctx, me, id);
    const out = await asRequestOf(id, () =>
      ctx.commands.execute(
        {
          type: 'ExpireResult',
          requestId,
          reason: 'DELETED',
          actor: me.actor,
          operator: me.tags.operator,
          because: null,
        },
        metaOf(ctx, me, commandIdOf(req, me, ctx), requestId),
      ),
    );
    const expired = out.events.find((e) => e.type === 'ResultExpired');
    return {
      requestId: id,
      deleted: true,
      alreadyDeleted: expired === undefined,
      bytes: expired?.type === 'ResultExpired' ? expired.data.bytes : null,
    };
  });
}
