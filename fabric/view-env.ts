// How much finished history the control plane's in-memory view keeps (docs/control-plane.md, "Bounded hot state"):
//   NDIF_VIEW_RECENT_FINISHED  finished requests kept in memory beyond the live ones (5000); older ones are served
//                              from the log and the read models
//   NDIF_VIEW_RECENT_EVENTS    events the in-memory audit index keeps (200000); older ones from the audit read model
import type { HotStateLimits } from '../projections/requests/state.js';
import { FabricError } from '../protocol/errors.js';

function count(env: NodeJS.ProcessEnv, name: string, min: number, fallback: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > 100_000_000)
    throw new FabricError(
      'FABRIC_CONFIG_INVALID',
      500,
      `${name}=${JSON.stringify(raw)} is not valid: an integer from ${min} to 100000000`,
      { hint: `fix ${name} or unset it for the default (${fallback})` },
    );
  return n;
}

export function hotStateFromEnv(
  env: NodeJS.ProcessEnv,
  scheduler: { resultRetentionMs?: number | null },
): Partial<HotStateLimits> {
  const out: Partial<HotStateLimits> = {};
  const recentFinished = count(env, 'NDIF_VIEW_RECENT_FINISHED', 0, 5000);
  if (recentFinished !== undefined) out.recentFinished = recentFinished;
  const recentEvents = count(env, 'NDIF_VIEW_RECENT_EVENTS', 1000, 200_000);
  if (recentEvents !== undefined) out.recentEvents = recentEvents;
  // Results kept forever need no retention data once their request leaves the view.
  if (scheduler.resultRetentionMs === null) out.retention = false;
  return out;
}
