// Reading one request for its reader: the id resolved in the reader's scope, its stream, the projection caught
// up to it, and the visibility rule (the submitter or an operator; anyone else is told it does not exist). With read models (distributed mode) the row and the history come from them, once
// they hold everything stored when the call came (read your writes); queue position and deployment phase come
// from the live view.
import type { RouteDeps } from '../../http/deps.js';
import type { Identity } from '../../auth/keys.js';
import { requestStream } from '../../domain/shared/ids.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { FabricError } from '../../protocol/errors.js';
import { requestStatusOf, type RequestStatusView } from '../../projections/control-plane/status.js';
import { requestViewOr } from '../../projections/requests/from-events.js';
import type { RequestView } from '../../projections/requests/state.js';
import { resolveRequestId } from '../../http/request-ids.js';
import { mayRead } from '../ws/connection.js';

/** The answer for a request the caller cannot name: the same for one that does not exist and for another key's. */
export function requestNotFound(requestId: string): FabricError {
  return new FabricError('API_REQUEST_NOT_FOUND', 404, `there is no request ${requestId}`, {
    hint: 'check the id the submission returned; to follow a request before it is submitted, subscribe on the status websocket',
    details: { requestId },
  });
}

export interface ReadRequest {
  /** The recorded id (scoped to its submitter). */
  requestId: string;
  events: StoredEvent[];
  view: RequestStatusView;
  /** The recorded request (trusted, priority, result…). */
  request: RequestView;
  submitter: string;
}

async function fromReadModels(deps: RouteDeps, me: Identity, shownId: string, requestId: string): Promise<ReadRequest> {
  const { ctx } = deps;
  const rm = ctx.readModels!.requests;
  await rm.catchUp(deps.config.readyTimeoutMs);
  const row = await rm.get(requestId);
  if (row === undefined || !mayRead(me, row.view.submitter)) throw requestNotFound(shownId);
  const events = await rm.events(requestId);
  if (ctx.view.position < row.position) await ctx.view.waitForPosition(row.position, deps.config.readyTimeoutMs);
  return {
    requestId,
    events,
    view: requestStatusOf(ctx.view.state, row.view),
    request: row.view,
    submitter: row.view.submitter,
  };
}

/** The request `me` names `shownId` (its own scope; an operator's full ids too), or the not-found answer. */
export async function readRequest(deps: RouteDeps, me: Identity, shownId: string): Promise<ReadRequest> {
  const { ctx } = deps;
  const requestId = await resolveRequestId(ctx, me, shownId);
  if (ctx.readModels !== undefined) return fromReadModels(deps, me, shownId, requestId);
  const events = await ctx.store.readStream(requestStream(requestId));
  if (events.length === 0) throw requestNotFound(shownId);
  const last = events[events.length - 1]!.position;
  if (ctx.view.position < last) await ctx.view.waitForPosition(last, deps.config.readyTimeoutMs);
  const s = ctx.view.state;
  // A finished request evicted from the view (bounded hot state) is folded from its stream, read above.
  const v = requestViewOr(s.requests.byId, requestId, events);
  // Scoping already keeps other keys' requests out of reach; were one reached, it answers as a missing one.
  if (v === undefined || !mayRead(me, v.submitter)) throw requestNotFound(shownId);
  return { requestId, events, view: requestStatusOf(s, v), request: v, submitter: v.submitter };
}
