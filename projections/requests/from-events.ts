// A request's view folded from its own stream: how a finished request evicted from the in-memory view (bounded hot
// state) is still answered, from the log's index by stream, with the same apply as the view.
import type { StoredEvent } from '../../eventstore/port.js';
import { applyRequests } from './apply.js';
import { initialRequestsState, type RequestView } from './state.js';

/** The view of the request whose stream `events` is (in revision order); undefined for an empty stream. */
export function requestViewFromEvents(requestId: string, events: readonly StoredEvent[]): RequestView | undefined {
  const s = initialRequestsState();
  for (const e of events) applyRequests(s, e);
  return s.byId.get(requestId);
}

/** The request's view: from the live view when it is there, else folded from its stream. */
export function requestViewOr(
  live: Map<string, RequestView>,
  requestId: string,
  events: readonly StoredEvent[],
): RequestView | undefined {
  return live.get(requestId) ?? requestViewFromEvents(requestId, events);
}
