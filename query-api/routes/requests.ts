// GET /requests/:id (status, position, history, logs, error, result), GET /requests (recent ones),
// GET /requests/:id/result (the result container's bytes).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { callerOf } from '../../http/access.js';
import type { RouteDeps } from '../../http/deps.js';
import { parseInput } from '../../http/validate.js';
import { keyMissing } from '../../auth/errors.js';
import { REQUEST_ID, requestStream } from '../../domain/shared/ids.js';
import { RateLimiter } from '../../http/rate-limit.js';
import { displayRequestId } from '../../http/request-ids.js';
import { FabricError } from '../../protocol/errors.js';
import { userStatus } from '../../projections/control-plane/status.js';
import type { RequestView } from '../../projections/requests/state.js';
import { requestViewOr } from '../../projections/requests/from-events.js';
import { runningBySubmitter, truePosition } from '../../projections/control-plane/positions.js';
import { resultField } from '../results/result-field.js';
import { verifyResultToken } from '../results/token.js';
import { historyOf } from '../status/history.js';
import { mayRead } from '../ws/connection.js';
import { readRequest, requestNotFound } from './read-request.js';

const idParams = z.strictObject({
  id: z.string().regex(REQUEST_ID, 'a request id: 1–160 of letters, digits and . _ : -'),
});
const STATUSES = [
  'RECEIVED',
  'QUEUED',
  'PROVISIONING',
  'DEPLOYING',
  'DISPATCHED',
  'RUNNING',
  'COMPLETED',
  'ERROR',
  'CANCELLED',
] as const;
const listQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).optional(),
  status: z.enum(STATUSES).optional(),
  /** `true`: only requests not finished yet (waiting or running), whatever their age. */
  active: z.enum(['true', 'false']).optional(),
  model: z.string().min(1).max(200).optional(),
});
const resultQuery = z.strictObject({ token: z.string().max(300).optional() });

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function requestQueryRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;
  const downloads =
    deps.config.downloadRateLimit === null || !deps.config.auth
      ? undefined
      : new RateLimiter(deps.config.downloadRateLimit, ctx.clock, 'result downloads');

  app.get('/requests/:id', async (req) => {
    const me = callerOf(req);
    const { id } = parseInput(idParams, req.params, 'params');
    const { requestId, events, view, request: v } = await readRequest(deps, me, id);
    const h = historyOf(events);
    return {
      requestId: id,
      model: view.modelKey,
      status: view.status,
      position: view.position,
      queueLength: view.queueLength,
      attempt: view.attempt,
      requeues: view.requeues.map((r) => ({
        reason: r.reason,
        attempt: r.attempt,
        at: new Date(r.atMs).toISOString(),
        text: r.text,
      })),
      replicaId: view.replicaId,
      agentId: view.agentId,
      trusted: v.trusted,
      priority: v.priority,
      timestamps: view.timestamps,
      deployment: view.deployment,
      statuses: h.statuses,
      logs: h.logs,
      logsTruncated: h.logsTruncated,
      logCapped: h.logCapped,
      logLines: view.logLines,
      error:
        view.error === null
          ? null
          : { phase: view.error.phase, type: view.error.type, message: view.error.message, stack: view.error.stack },
      cancelled: view.cancelled,
      result: view.result === null ? null : await resultField(deps, requestId, view.result),
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
    const running = runningBySubmitter(s.requests);
    for (let i = all.length - 1; i >= 0 && out.length < limit; i--) {
      const v = all[i]!;
      if (q.active === 'true' && v.finishedAtMs !== null) continue;
      if (q.model !== undefined && v.modelKey !== q.model) continue;
      if (!mayRead(me, v.submitter)) continue;
      const status = userStatus(s, v);
      if (q.status !== undefined && status !== q.status) continue;
      out.push({
        requestId: displayRequestId(me, v.requestId),
        model: v.modelKey,
        status,
        position: v.status === 'QUEUED' ? (truePosition(s, v.requestId, running) ?? null) : null,
        submitter: v.submitter,
        receivedAt: iso(v.receivedAtMs),
        finishedAt: iso(v.finishedAtMs),
        since: iso(phaseSince(v)),
        error: v.error === null ? null : { phase: v.error.phase, type: v.error.type },
        attempt: v.attempt,
        agentId: v.agentId,
      });
    }
    return { asOf: s.position, requests: out };
  });

  app.get('/requests/:id/result', { config: { access: 'optional' } }, async (req, reply) => {
    const { id } = parseInput(idParams, req.params, 'params');
    const { token } = parseInput(resultQuery, req.query, 'query');
    let view: RequestView;
    // A signed URL names the recorded id (it needs no key); with a key the id is the caller's.
    if (token !== undefined) {
      let known = ctx.view.state.requests.byId.get(id);
      if (known === undefined) {
        const events = await ctx.store.readStream(requestStream(id));
        if (events.length === 0) throw requestNotFound(id);
        await ctx.view.waitForPosition(events[events.length - 1]!.position, deps.config.readyTimeoutMs);
        // Evicted from the view once finished (bounded hot state): folded from its stream.
        known = requestViewOr(ctx.view.state.requests.byId, id, events);
        if (known === undefined) throw requestNotFound(id);
      }
      view = known;
    } else {
      if (req.identity === null) {
        const e = keyMissing();
        throw new FabricError(
          e.code,
          e.httpStatus,
          "downloading a result needs the signed URL's token or the API key that submitted the request",
          { hint: e.hint },
        );
      }
      view = (await readRequest(deps, req.identity, id)).request;
    }
    const target = downloadable(view);
    if (target === undefined || (target.writing && ctx.blobs.getGrowing === undefined))
      throw notReady(id, userStatus(ctx.view.state, view));
    if (token !== undefined) verifyResultToken(deps.config.resultSecret, token, id, target.ref, ctx.clock());
    if (view.result?.expiredAt !== undefined)
      throw resultExpired(id, view.result.expiredAt, view.result.expiredBecause ?? 'RETENTION');
    // Downloads count against the submitter of the result, signed URLs included (a shared URL is not a free pass).
    const release = downloads?.take(`${view.submitter} (downloads)`) ?? (() => undefined);
    reply.raw.once('close', release);
    // The headers of a result are set once its bytes can be read: an error before then is answered as JSON.
    const answer = () =>
      reply
        .code(200)
        .header('content-type', 'application/vnd.ndif.result')
        .header('content-disposition', `attachment; filename="${id}.ndifres"`);
    if (target.writing) {
      // Sent as the agent writes it; the client checks the whole against the sha256 its COMPLETED carries. An attempt
      // that ends without it (requeued, failed) or a corrupt whole cuts the download short.
      const recorded = view.requestId;
      const ref = target.ref;
      const stream = await ctx.blobs.getGrowing!(ref, target.bytes, {
        abandoned: () => {
          const now = ctx.view.state.requests.byId.get(recorded);
          return now === undefined || (now.result?.ref !== ref && now.writing?.ref !== ref);
        },
      });
      return answer()
        .header('x-ndif-result-writing', 'true')
        .header('content-length', String(target.bytes))
        .send(stream);
    }
    if (ctx.blobs.getStream !== undefined && view.result!.bytes > STREAMED_DOWNLOAD_MIN_BYTES) {
      // Read and sent piece by piece: the first bytes leave at once and no download holds a whole result here. A
      // blob found corrupt at its end cuts the download short (the client checks the sha256 in this header too).
      const { info, stream } = await ctx.blobs.getStream(view.result!.ref);
      return answer().header('x-ndif-sha256', info.sha256).header('content-length', String(info.size)).send(stream);
    }
    const blob = await ctx.blobs.get(view.result!.ref);
    return answer().header('x-ndif-sha256', blob.sha256).send(blob.bytes);
  });
}

/** What a download of the request reads: its result, else the one its attempt in flight is writing. */
function downloadable(v: RequestView): { ref: string; bytes: number; writing: boolean } | undefined {
  if (v.result !== null) return { ref: v.result.ref, bytes: v.result.bytes, writing: false };
  const w = v.writing;
  if (w === undefined || w.attempt !== v.attempt || (v.status !== 'RUNNING' && v.status !== 'DISPATCHED'))
    return undefined;
  return { ref: w.ref, bytes: w.bytes, writing: true };
}

/** Results above this size are downloaded as a stream from the blob store (where it can stream). */
export const STREAMED_DOWNLOAD_MIN_BYTES = 1024 * 1024;

function resultExpired(requestId: string, expiredAt: string, why: 'RETENTION' | 'DELETED'): FabricError {
  return new FabricError(
    'RESULT_EXPIRED',
    410,
    `the result of request ${requestId} is gone: ${why === 'DELETED' ? 'it was deleted' : 'it was kept as long as results are kept'} (at ${expiredAt})`,
    {
      hint: 'run the request again for a new result; download results soon after they complete',
      details: { requestId, expiredAt, reason: why },
    },
  );
}

function notReady(requestId: string, status: string): FabricError {
  return new FabricError('RESULT_NOT_READY', 409, `request ${requestId} has no result: it is ${status}`, {
    hint:
      status === 'ERROR' || status === 'CANCELLED'
        ? 'it will never have one; GET /requests/:id says why'
        : 'wait for COMPLETED (status websocket), then download',
    details: { requestId, status },
  });
}

/** When the request entered its current phase: running, dispatched, waiting in the queue, finished, or received. */
function phaseSince(v: {
  receivedAtMs: number;
  queuedAtMs: number | null;
  dispatchedAtMs: number | null;
  startedAtMs: number | null;
  finishedAtMs: number | null;
  status: string;
}): number {
  if (v.finishedAtMs !== null) return v.finishedAtMs;
  if (v.status === 'RUNNING' && v.startedAtMs !== null) return v.startedAtMs;
  if (v.status === 'DISPATCHED' && v.dispatchedAtMs !== null) return v.dispatchedAtMs;
  if (v.status === 'QUEUED' && v.queuedAtMs !== null) return v.queuedAtMs;
  return v.receivedAtMs;
}
