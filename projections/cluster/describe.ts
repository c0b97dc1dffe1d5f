// Sentences for operators from recorded decisions.
import type { EventData } from '../../domain/events/types.js';
import { fmtBytes } from '../../domain/shared/format.js';

export function describeEvaluationText(r: EventData<'DeploymentRefused'>): string {
  const why = r.candidates.map((c) => `${c.agentId}: ${c.excluded ?? c.level}`).join('; ');
  return (
    `${r.modelKey} needs ${fmtBytes(r.neededBytes)} (${fmtBytes(r.bytesPerGpu)} on each of ${r.gpus} GPU(s)); ` +
    `best GPU has ${fmtBytes(r.bestGpuFreeBytes)} free, at most ${fmtBytes(r.evictableBytes)} after evictions` +
    (why === '' ? '; no agent is registered' : `; ${why}`) +
    omittedText(r.omitted)
  );
}

/** The agents a decision counted instead of listing: `; 990 more agent(s): no-room 700, not-ranked 290`. */
export function omittedText(o: { agents: number; byReason: Record<string, number> } | undefined): string {
  if (o === undefined || o.agents === 0) return '';
  const parts = Object.entries(o.byReason)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([k, n]) => `${k} ${n}`);
  return `; ${o.agents} more agent(s): ${parts.join(', ')}`;
}
