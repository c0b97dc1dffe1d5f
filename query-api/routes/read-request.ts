// Reading one request for its reader: its stream, the projection caught up to it, and the visibility rule (the
// submitter or an operator).
import type { RouteDeps } from '../../auth/http/deps.js';
import type { Identity } from '../../auth/keys.js';
import { requestStream } from '../../domain/shared/ids.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { FabricError } from '../../protocol/errors.js';
import { requestStatus, type RequestStatusView } from '../../projections/control-plane/status.js';
import { forbidden, mayRead } from '../ws/connection.js';

export function requestNotFound(requestId: string): FabricError {
  return new FabricError('API_REQUEST_NOT_FOUND', 404, `there is no request ${requestId}`, {
    hint: 'check the id the submission returned; to follow a request before it is submitted, subscribe on the status websocket',
    details: { requestId },
  });
}

export async function readRequest(deps: RouteDeps, me: Identity, requestId: string): Promise<{ events: StoredEvent[]; view: RequestStatusView; submitter: string }> {
  const { ctx } = deps;
  const events = await ctx.store.readStream(requestStream(requestId));
  if (events.length === 0) throw requestNotFound(requestId);
  const last = events[events.length - 1]!.position;
  if (ctx.view.position < last) await ctx.view.waitForPosition(last, deps.config.readyTimeoutMs);
  const s = ctx.view.state;
  const v = s.requests.byId.get(requestId);
  const view = requestStatus(s, requestId);
  if (v === undefined || view === undefined) throw requestNotFound(requestId);
  if (!mayRead(me, v.submitter)) throw forbidden(requestId, me);
  return { events, view, submitter: v.submitter };
}
