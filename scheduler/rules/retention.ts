// Retention: a result kept longer than resultRetentionMs expires (ExpireResult → ResultExpired); the control
// plane's result reaper then deletes its blob. Read from the requests projection's kept results (oldest
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
  let planned = 0;
  // `kept` is in completion order and loses each result as it expires: its first entries are the oldest.
  for (const [requestId, due] of s.kept) {
    if (planned >= MAX_PER_ROUND || due.atMs + retentionMs > ctx.now) break;
    if (ctx.touchedRequests.has(requestId)) continue;
    // A request evicted from the view is expired from what was kept of it (its result's ref and completing event).
    const v = s.byId.get(requestId);
    const ref = v?.result?.ref ?? due.ref;
    const cause = v?.lastEvent ?? due.cause;
    if (ref === null || cause === null) continue;
    ctx.touchedRequests.add(requestId);
    planned++;
    const ageMs = ctx.now - due.atMs;
    ctx.emit(
      `sched:expire:${requestId}`,
      {
        type: 'ExpireResult',
        requestId,
        reason: 'RETENTION',
        actor: SCHEDULER_ACTOR,
        operator: true,
        because: {
          rule: 'result-retention',
          text: `the result was kept ${fmtMs(ageMs)}; results are kept ${fmtMs(retentionMs)}`,
          numbers: { ageMs, retentionMs, bytes: due.bytes },
          refs: { resultRef: ref },
        },
      },
      cause,
    );
  }
}
