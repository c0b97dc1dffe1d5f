// Time limits: a request running past its execution limit (its own, else its deployment's — 60 s unless the
// deployment says otherwise —, never more than its key's maximum) fails with Timeout; a request waiting longer
// than its queue limit fails with QueueTimeout.
import { fmtMs } from '../../domain/shared/format.js';
import type { PlanContext } from '../plan-context.js';
import { executionLimitMs, expired } from '../../projections/control-plane/deadlines.js';

export function timeoutRule(ctx: PlanContext): void {
  if (!ctx.input.tick) return;
  const s = ctx.state;
  // Only the deadlines already passed (projections/control-plane/deadlines.ts), never every active request.
  for (const { d, v } of expired(s.deadlines, s.requests, ctx.now)) {
    const id = v.requestId;
    if (ctx.touchedRequests.has(id)) continue;
    if (d.kind === 'execution' && v.dispatchedAtMs !== null) {
      const limit = executionLimitMs(s.cluster, v);
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
    } else if (d.kind === 'queue' && v.options.queueTimeoutMs !== null && v.queuedAtMs !== null) {
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
