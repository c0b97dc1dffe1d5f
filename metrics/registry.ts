// A process's Prometheus registry (prom-client): Node's own process metrics (CPU, memory, event-loop lag, GC,
// under their standard names) plus the fabric's `ndif_…` metrics that the other files of this folder add.
// NDIF_METRICS=off leaves every metric out: no registry, no /metrics, no listeners, no timing wrappers.
import { collectDefaultMetrics, Registry } from 'prom-client';
import { FabricError } from '../protocol/errors.js';

/** Seconds: from a millisecond up to five minutes (an HTTP call, an append, a queue wait, a run). */
export const SECONDS_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

export function metricsEnabledFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env.NDIF_METRICS;
  if (raw === undefined || raw === '' || raw === 'on') return true;
  if (raw === 'off') return false;
  throw new FabricError('FABRIC_CONFIG_INVALID', 500, `NDIF_METRICS=${JSON.stringify(raw)} is not valid: on or off`, {
    hint: 'unset NDIF_METRICS (metrics on) or set it to off',
  });
}

export function newRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}
