// Sentences for operators from recorded decisions.
import type { EventData } from '../../domain/events/types.js';
import { fmtBytes } from '../../domain/shared/format.js';

export function describeEvaluationText(r: EventData<'DeploymentRefused'>): string {
  const why = r.candidates.map((c) => `${c.agentId}: ${c.excluded ?? c.level}`).join('; ');
  return (
    `${r.modelKey} needs ${fmtBytes(r.neededBytes)} (${fmtBytes(r.bytesPerGpu)} on each of ${r.gpus} GPU(s)); ` +
    `best GPU has ${fmtBytes(r.bestGpuFreeBytes)} free, at most ${fmtBytes(r.evictableBytes)} after evictions` +
    (why === '' ? '; no agent is registered' : `; ${why}`)
  );
}
