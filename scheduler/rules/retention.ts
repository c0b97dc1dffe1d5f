// Retention: a result kept longer than resultRetentionMs expires (ExpireResult → ResultExpired); the control
// plane's result reaper then deletes its blob. Read from the requests projection's retention queue (oldest
// completion first), so a tick looks only at what is due.
import { SCHEDULER_ACTOR } from '../config.js';
import type { PlanContext } from '../plan-context.js';
import { fmtMs } from '../../domain/shared/format.js';

/** Expiries planned per round (the next round takes the rest). */
const MAX_PER_ROUND = 500;

export function retentionRule(ctx: PlanContext): void {
  const retentionMs = ctx.input.config.resultRetentionMs;
  if (!ctx.input.tick || retentionMs === null) return;
  const s = ctx.state.requests;
  const r = s.retention;
  let planned = 0;
  for (let i = r.head; i < r.queue.length && planned < MAX_PER_ROUND; i++) {
    const due = r.queue[i]!;
    if (due.atMs + retentionMs > ctx.now) break;
    const v = s.byId.get(due.requestId);
    if (v?.result == null || v.result.expiredAt !== undefined || ctx.touchedRequests.has(v.requestId)) continue;
    ctx.touchedRequests.add(v.requestId);
    planned++;
    const ageMs = ctx.now - due.atMs;
    ctx.emit(
      `sched:expire:${v.requestId}`,
      {
        type: 'ExpireResult',
        requestId: v.requestId,
        reason: 'RETENTION',
        actor: SCHEDULER_ACTOR,
        operator: true,
        because: {
          rule: 'result-retention',
          text: `the result was kept ${fmtMs(ageMs)}; results are kept ${fmtMs(retentionMs)}`,
          numbers: { ageMs, retentionMs, bytes: v.result.bytes },
          refs: { resultRef: v.result.ref },
        },
      },
      v.lastEvent,
    );
  }
}
