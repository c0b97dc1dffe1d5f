// How much finished history the control plane's in-memory view keeps (docs/control-plane.md, "Bounded hot state"):
//   NDIF_VIEW_RECENT_FINISHED  finished requests kept in memory beyond the live ones (5000); older ones are served
//                              from the log and the read models
import type { HotStateLimits } from '../projections/requests/state.js';
import { FabricError } from '../protocol/errors.js';

export function hotStateFromEnv(
  env: NodeJS.ProcessEnv,
  scheduler: { resultRetentionMs?: number | null },
): Partial<HotStateLimits> {
  const out: Partial<HotStateLimits> = {};
  const raw = env.NDIF_VIEW_RECENT_FINISHED;
  if (raw !== undefined && raw !== '') {
    const n = Number(raw);
    if (!/^[0-9]+$/.test(raw) || !Number.isSafeInteger(n) || n > 10_000_000)
      throw new FabricError(
        'FABRIC_CONFIG_INVALID',
        500,
        `NDIF_VIEW_RECENT_FINISHED=${JSON.stringify(raw)} is not valid: an integer from 0 to 10000000`,
        { hint: 'fix NDIF_VIEW_RECENT_FINISHED or unset it for the default (5000)' },
      );
    out.recentFinished = n;
  }
  // Results kept forever need no retention data once their request leaves the view.
  if (scheduler.resultRetentionMs === null) out.retention = false;
  return out;
}
