// GET /requests/:id (status, position, history, logs, error, result), GET /requests (recent ones),
// GET /requests/:id/result (the result container's bytes).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { callerOf } from '../../http/access.js';
import type { RouteDeps } from '../../http/deps.js';
import { parseInput } from '../../http/validate.js';
import { keyMissing } from '../../auth/errors.js';
import { ENTITY_ID, requestStream } from '../../domain/shared/ids.js';
import { FabricError } from '../../protocol/errors.js';
import { userStatus } from '../../projections/control-plane/status.js';
import { positionOf } from '../../projections/queue/queries.js';
import { resultField } from '../results/result-field.js';
import { verifyResultToken } from '../results/token.js';
import { historyOf } from '../status/history.js';
import { mayRead } from '../ws/connection.js';
import { readRequest, requestNotFound } from './read-request.js';

const idParams = z.strictObject({ id: z.string().regex(ENTITY_ID, 'a request id: 1–128 of letters, digits and . _ : -') });
const STATUSES = ['RECEIVED', 'QUEUED', 'PROVISIONING', 'DEPLOYING', 'DISPATCHED', 'RUNNING', 'COMPLETED', 'ERROR', 'CANCELLED'] as const;
const listQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(500).optional(), status: z.enum(STATUSES).optional() });
const resultQuery = z.strictObject({ token: z.string().max(300).optional() });

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function requestQueryRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;

  app.get('/requests/:id', async (req) => {
    const me = callerOf(req);
    const { id } = parseInput(idParams, req.params, 'params');
    const { events, view, request: v } = await readRequest(deps, me, id);
    const h = historyOf(events);
    return {
      requestId: id,
      model: view.modelKey,
      status: view.status,
      position: view.position,
      queueLength: view.queueLength,
      attempt: view.attempt,
      requeues: view.requeues.map((r) => ({ reason: r.reason, attempt: r.attempt, at: new Date(r.atMs).toISOString(), text: r.text })),
      replicaId: view.replicaId,
      agentId: view.agentId,
      trusted: v.trusted,
      priority: v.priority,
      timestamps: view.timestamps,
      deployment: view.deployment,
      statuses: h.statuses,
      logs: h.logs,
      logsTruncated: h.logsTruncated,
      logLines: view.logLines,
      error: view.error === null ? null : { phase: view.error.phase, type: view.error.type, message: view.error.message, stack: view.error.stack },
      cancelled: view.cancelled,
      result: view.result === null ? null : await resultField(deps, id, view.result),
      asOf: view.asOf,
    };
  });

  app.get('/requests', async (req) => {
    const me = callerOf(req);
    const q = parseInput(listQuery, req.query, 'query');
    const limit = q.limit ?? 50;
    const s = ctx.view.state;
    const all = [...s.requests.byId.values()];
    const out = [];
    for (let i = all.length - 1; i >= 0 && out.length < limit; i--) {
      const v = all[i]!;
      if (!mayRead(me, v.submitter)) continue;
      const status = userStatus(s, v);
      if (q.status !== undefined && status !== q.status) continue;
      out.push({ requestId: v.requestId, model: v.modelKey, status, position: v.status === 'QUEUED' ? (positionOf(s.queue, v.requestId) ?? null) : null, submitter: v.submitter, receivedAt: iso(v.receivedAtMs), finishedAt: iso(v.finishedAtMs) });
    }
    return { asOf: s.position, requests: out };
  });

  app.get('/requests/:id/result', { config: { access: 'optional' } }, async (req, reply) => {
    const { id } = parseInput(idParams, req.params, 'params');
    const { token } = parseInput(resultQuery, req.query, 'query');
    let view;
    if (token !== undefined) {
      let known = ctx.view.state.requests.byId.get(id);
      if (known === undefined) {
        const events = await ctx.store.readStream(requestStream(id));
        if (events.length === 0) throw requestNotFound(id);
        await ctx.view.waitForPosition(events[events.length - 1]!.position, deps.config.readyTimeoutMs);
        known = ctx.view.state.requests.byId.get(id);
        if (known === undefined) throw requestNotFound(id);
      }
      if (known.result === null) throw notReady(id, userStatus(ctx.view.state, known));
      verifyResultToken(deps.config.resultSecret, token, id, known.result.ref, ctx.clock());
      view = known;
    } else {
      if (req.identity === null) {
        const e = keyMissing();
        throw new FabricError(e.code, e.httpStatus, 'downloading a result needs the signed URL\'s token or the API key that submitted the request', { hint: e.hint });
      }
      view = (await readRequest(deps, req.identity, id)).request;
      if (view.result === null) throw notReady(id, userStatus(ctx.view.state, view));
    }
    const blob = await ctx.blobs.get(view.result!.ref);
    return reply
      .code(200)
      .header('content-type', 'application/vnd.ndif.result')
      .header('x-ndif-sha256', blob.sha256)
      .header('content-disposition', `attachment; filename="${id}.ndifres"`)
      .send(blob.bytes);
  });
}

function notReady(requestId: string, status: string): FabricError {
  return new FabricError('RESULT_NOT_READY', 409, `request ${requestId} has no result: it is ${status}`, {
    hint: status === 'ERROR' || status === 'CANCELLED' ? 'it will never have one; GET /requests/:id says why' : 'wait for COMPLETED (status websocket), then download',
    details: { requestId, status },
  });
}
