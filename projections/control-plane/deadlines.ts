// Deadlines of the time limits (execution and queue), in a min-heap, so the timeout rule looks only at what has
// expired instead of at every active request each tick. Derived from the requests and cluster read models (never in
// a snapshot): an entry is pushed when a request is dispatched (its execution limit) or queued (its queue limit),
// and entries that no longer hold (the request moved on) are dropped when they reach the top.
import type { ClusterState } from '../cluster/state.js';
import type { RequestsState, RequestView } from '../requests/state.js';

export interface Deadline {
  atMs: number;
  requestId: string;
  kind: 'execution' | 'queue';
  /** The attempt (execution) or the start of the stay in the queue (queue) it was set for. */
  mark: number;
  /** Order of the request's arrival (ties and the order in which expired limits are handled). */
  seq: number;
}

export interface Deadlines {
  heap: Deadline[];
  /** Arrival order of requests not finished. */
  seq: Map<string, number>;
}

export const emptyDeadlines = (): Deadlines => ({ heap: [], seq: new Map() });

const before = (a: Deadline, b: Deadline) => a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);

function push(h: Deadline[], d: Deadline): void {
  h.push(d);
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!before(h[i], h[p])) break;
    [h[i], h[p]] = [h[p], h[i]];
    i = p;
  }
}

function pop(h: Deadline[]): void {
  const last = h.pop()!;
  if (h.length === 0) return;
  h[0] = last;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    const r = l + 1;
    let m = i;
    if (l < h.length && before(h[l], h[m])) m = l;
    if (r < h.length && before(h[r], h[m])) m = r;
    if (m === i) return;
    [h[i], h[m]] = [h[m], h[i]];
    i = m;
  }
}

/** The execution limit of the attempt in flight: its own, else its deployment's, never past its key's maximum. */
export function executionLimitMs(cluster: ClusterState, v: RequestView): number | null {
  const own =
    v.options.timeoutMs ??
    (v.replicaId === null ? null : (cluster.replicas.get(v.replicaId)?.settings.timeoutMs ?? null));
  const keyMax = v.options.maxTimeoutMs ?? null;
  return own === null ? keyMax : keyMax === null ? own : Math.min(own, keyMax);
}

/** Whether a deadline still stands for the request as it is now. */
export function stillHolds(d: Deadline, v: RequestView | undefined): v is RequestView {
  if (v === undefined) return false;
  if (d.kind === 'execution') return (v.status === 'DISPATCHED' || v.status === 'RUNNING') && v.attempt === d.mark;
  return v.status === 'QUEUED' && v.queuedAtMs === d.mark;
}

/** Updates the deadlines after an event about `requestId` was applied. */
export function trackDeadlines(
  x: Deadlines,
  cluster: ClusterState,
  requests: RequestsState,
  type: string,
  requestId: string,
  position: number,
): void {
  const v = requests.byId.get(requestId);
  if (type === 'RequestReceived') x.seq.set(requestId, position);
  if (v !== undefined && v.finishedAtMs !== null) x.seq.delete(requestId);
  if (v !== undefined && type === 'RequestDispatched' && v.dispatchedAtMs !== null) {
    const limit = executionLimitMs(cluster, v);
    const seq = x.seq.get(requestId) ?? position;
    if (limit !== null)
      push(x.heap, { atMs: v.dispatchedAtMs + limit, requestId, kind: 'execution', mark: v.attempt, seq });
  }
  if (
    v !== undefined &&
    (type === 'RequestQueued' || type === 'RequestRequeued') &&
    v.status === 'QUEUED' &&
    v.queuedAtMs !== null &&
    v.options.queueTimeoutMs !== null
  ) {
    const seq = x.seq.get(requestId) ?? position;
    push(x.heap, { atMs: v.queuedAtMs + v.options.queueTimeoutMs, requestId, kind: 'queue', mark: v.queuedAtMs, seq });
  }
  while (x.heap.length > 0 && !stillHolds(x.heap[0], requests.byId.get(x.heap[0].requestId))) pop(x.heap);
  // Entries behind a long deadline at the top are not reached: drop the ones that no longer hold now and then.
  if (x.heap.length > 2 * requests.active.size + 1024) {
    const keep = x.heap.filter((d) => stillHolds(d, requests.byId.get(d.requestId)));
    x.heap.length = 0;
    for (const d of keep) push(x.heap, d);
  }
}

/** The deadlines of a state read from a snapshot. */
export function rebuildDeadlines(cluster: ClusterState, requests: RequestsState): Deadlines {
  const x = emptyDeadlines();
  let seq = 0;
  for (const id of requests.active) {
    x.seq.set(id, seq++);
    const v = requests.byId.get(id)!;
    if ((v.status === 'DISPATCHED' || v.status === 'RUNNING') && v.dispatchedAtMs !== null) {
      const limit = executionLimitMs(cluster, v);
      if (limit !== null)
        push(x.heap, {
          atMs: v.dispatchedAtMs + limit,
          requestId: id,
          kind: 'execution',
          mark: v.attempt,
          seq: x.seq.get(id)!,
        });
    } else if (v.status === 'QUEUED' && v.queuedAtMs !== null && v.options.queueTimeoutMs !== null)
      push(x.heap, {
        atMs: v.queuedAtMs + v.options.queueTimeoutMs,
        requestId: id,
        kind: 'queue',
        mark: v.queuedAtMs,
        seq: x.seq.get(id)!,
      });
  }
  return x;
}

/** Deadlines passed at `nowMs` (strictly), still standing, in arrival order of their requests. */
export function expired(x: Deadlines, requests: RequestsState, nowMs: number): { d: Deadline; v: RequestView }[] {
  const out: { d: Deadline; v: RequestView }[] = [];
  const stack = x.heap.length > 0 ? [0] : [];
  while (stack.length > 0) {
    const i = stack.pop()!;
    const d = x.heap[i];
    if (d.atMs >= nowMs) continue;
    const v = requests.byId.get(d.requestId);
    if (stillHolds(d, v)) out.push({ d, v });
    for (const c of [2 * i + 1, 2 * i + 2]) if (c < x.heap.length) stack.push(c);
  }
  return out.sort((a, b) => a.d.seq - b.d.seq || (a.d.kind < b.d.kind ? -1 : 1));
}
