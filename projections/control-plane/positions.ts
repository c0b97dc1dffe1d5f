// True queue positions: a request's place is the number of requests dispatch will take before it. Dispatch
// passes over the requests of a submitter that already runs as many requests as its key allows (maxRunning,
// recorded with each request), so those do not count ahead of anyone else's. The queue order itself is the fair
// share order (projections/queue).
import type { QueueState } from '../queue/state.js';
import type { RequestsState } from '../requests/state.js';
import type { ControlPlaneState } from './state.js';

/** Requests in flight (DISPATCHED or RUNNING) per submitter. */
export function runningBySubmitter(r: RequestsState): Map<string, number> {
  return new Map(r.runningBySubmitter);
}

/** Whether a queued request of `submitter` with this limit is passed over by dispatch now. */
export const isHeld = (running: number, maxRunning: number | null | undefined): boolean =>
  maxRunning != null && running >= maxRunning;

/**
 * 0-based place of a queued request (0 = next), counting only the requests ahead that dispatch will take first;
 * undefined when it is not queued. `running` may be passed when asked for many requests of one view.
 */
export function truePosition(
  s: ControlPlaneState,
  requestId: string,
  running: Map<string, number> = runningBySubmitter(s.requests),
): number | undefined {
  return positionSkippingHeld(s.queue, s.requests, requestId, running);
}

function positionSkippingHeld(
  q: QueueState,
  r: RequestsState,
  requestId: string,
  running: Map<string, number>,
): number | undefined {
  const p = q.pending.get(requestId);
  if (p === undefined) return undefined;
  const queue = q.byModel.get(p.modelKey);
  const entry = queue?.get(requestId);
  if (queue === undefined || entry === undefined) return undefined;
  let pos = queue.position(requestId);
  const subs = q.bySubmitter.get(p.modelKey);
  if (subs === undefined || running.size === 0) return pos;
  for (const [submitter, n] of running) {
    if (submitter === entry.value.submitter) continue;
    const theirs = subs.get(submitter);
    const first = theirs?.peek();
    if (theirs === undefined || first === undefined) continue;
    if (!isHeld(n, r.byId.get(first.id)?.options.maxRunning)) continue;
    pos -= theirs.countBefore(entry.key);
  }
  return pos;
}
