// The metrics of a fabric process (metrics/), made by its composition root unless NDIF_METRICS=off.
import { FabricMetrics } from '../metrics/fabric-metrics.js';
import { metricsEnabledFromEnv } from '../metrics/registry.js';

export function processMetrics(env: NodeJS.ProcessEnv = process.env): FabricMetrics | undefined {
  return metricsEnabledFromEnv(env) ? new FabricMetrics() : undefined;
}

/** The event store's kind, the `store` label of its append latency. */
export function eventStoreKind(env: NodeJS.ProcessEnv = process.env): string {
  return env.NDIF_EVENT_STORE || 'sqlite';
}
