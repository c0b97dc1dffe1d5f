// Time limits: a request running past its execution limit (its own, else its deployment's — 60 s unless the
// deployment says otherwise —, never more than its key's maximum) fails with Timeout; a request waiting longer
// than its queue limit fails with QueueTimeout.
import { fmtMs } from '../../domain/shared/format.js';
import type { PlanContext } from '../plan-context.js';

export function timeoutRule(ctx: PlanContext): void {
  if (!ctx.input.tick) return;
  const s = ctx.state;
  for (const id of s.requests.active) {
    const v = s.requests.byId.get(id)!;
    if (ctx.touchedRequests.has(id)) continue;
    if ((v.status === 'DISPATCHED' || v.status === 'RUNNING') && v.dispatchedAtMs !== null) {
      const own =
        v.options.timeoutMs ??
        (v.replicaId === null ? null : (s.cluster.replicas.get(v.replicaId)?.settings.timeoutMs ?? null));
      const keyMax = v.options.maxTimeoutMs ?? null;
      const limit = own === null ? keyMax : keyMax === null ? own : Math.min(own, keyMax);
      const ran = ctx.now - v.dispatchedAtMs;
      if (limit === null || ran <= limit) continue;
      ctx.touchedRequests.add(id);
      ctx.emit(
        `sched:timeout:${id}:${v.attempt}`,
        {
          type: 'FailRequest',
          requestId: id,
          when: 'IN_FLIGHT',
          attempt: v.attempt,
          phase: 'execution',
          errorType: 'Timeout',
          message: `attempt ${v.attempt} ran ${fmtMs(ran)} since dispatch; the limit is ${fmtMs(limit)}`,
          because: {
            rule: 'execution-timeout',
            text: `ran ${ran} ms > limit ${limit} ms`,
            numbers: { ranMs: ran, limitMs: limit },
          },
        },
        v.lastEvent,
      );
    } else if (v.status === 'QUEUED' && v.options.queueTimeoutMs !== null && v.queuedAtMs !== null) {
      const waited = ctx.now - v.queuedAtMs;
      const limit = v.options.queueTimeoutMs;
      if (waited <= limit) continue;
      ctx.touchedRequests.add(id);
      ctx.emit(
        `sched:queue-timeout:${id}:${v.attempt}`,
        {
          type: 'FailRequest',
          requestId: id,
          when: 'QUEUED',
          attempt: v.attempt,
          phase: 'queue',
          errorType: 'QueueTimeout',
          message: `waited ${fmtMs(waited)} in the queue; the limit is ${fmtMs(limit)}`,
          because: {
            rule: 'queue-timeout',
            text: `waited ${waited} ms > limit ${limit} ms`,
            numbers: { waitedMs: waited, limitMs: limit },
          },
        },
        v.lastEvent,
      );
    }
  }
}
