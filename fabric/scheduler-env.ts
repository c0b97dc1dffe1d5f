// The scheduler's timing knobs and the defaults of on-demand deployments, from the environment, so that a test
// or a soak can compress hours of behaviour into seconds (docs/reliability.md, "Compressed time"). Unset means
// the scheduler's (and the domain's) defaults:
//   NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS  an agent without a heartbeat this long is UNRESPONSIVE (6000)
//   NDIF_SCHEDULER_AGENT_GRACE_MS        an UNRESPONSIVE agent is waited for this long before it is LOST (30000)
//   NDIF_SCHEDULER_AUTOSCALE_CHECK_MS    how often autoscale is considered (5000)
//   NDIF_SCHEDULER_TICK_MS               time-based rules run at least this often (1000)
//   NDIF_RESULT_RETENTION_MS             results are deleted this long after completing (86400000; 0: kept)
//   NDIF_ONDEMAND_MIN_DEPLOYMENT_MS      minimum deployment time of an on-demand deployment (3600000)
//   NDIF_ONDEMAND_AUTOSCALE_THRESHOLD_MS oldest wait that adds a replica to an on-demand deployment (30000)
//   NDIF_ONDEMAND_AUTOSCALE_BACKOFF_MS   wait between two autoscale steps of an on-demand deployment (120000)
import type { DeploymentSettingsInput } from '../domain/deployment/settings.js';
import { FabricError } from '../protocol/errors.js';
import type { SchedulerConfig } from '../scheduler/config.js';

/** Settings an on-demand deployment gets besides its catalog entry's. */
export type OnDemandDefaults = Pick<DeploymentSettingsInput, 'minDeploymentMs' | 'autoscale'>;

function ms(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const v = Number(raw);
  if (!/^[0-9]+$/.test(raw) || !Number.isSafeInteger(v) || v < min) {
    throw new FabricError(
      'FABRIC_CONFIG_INVALID',
      500,
      `${name}=${JSON.stringify(raw)} is not valid: an integer number of milliseconds >= ${min}`,
      {
        hint: `fix ${name} or unset it for the default`,
      },
    );
  }
  return v;
}

export function schedulerConfigFromEnv(
  env: NodeJS.ProcessEnv = process.env,
): Partial<Omit<SchedulerConfig, 'onDemand'>> {
  const out: Partial<Omit<SchedulerConfig, 'onDemand'>> = {};
  const heartbeatTimeoutMs = ms(env, 'NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS', 1);
  const agentGraceMs = ms(env, 'NDIF_SCHEDULER_AGENT_GRACE_MS', 0);
  const autoscaleCheckMs = ms(env, 'NDIF_SCHEDULER_AUTOSCALE_CHECK_MS', 1);
  const tickMs = ms(env, 'NDIF_SCHEDULER_TICK_MS', 10);
  if (heartbeatTimeoutMs !== undefined) out.heartbeatTimeoutMs = heartbeatTimeoutMs;
  if (agentGraceMs !== undefined) out.agentGraceMs = agentGraceMs;
  if (autoscaleCheckMs !== undefined) out.autoscaleCheckMs = autoscaleCheckMs;
  if (tickMs !== undefined) out.tickMs = tickMs;
  const retention = ms(env, 'NDIF_RESULT_RETENTION_MS', 0);
  if (retention !== undefined) out.resultRetentionMs = retention === 0 ? null : retention;
  return out;
}

export function onDemandDefaultsFromEnv(env: NodeJS.ProcessEnv = process.env): OnDemandDefaults {
  const out: OnDemandDefaults = {};
  const minDeploymentMs = ms(env, 'NDIF_ONDEMAND_MIN_DEPLOYMENT_MS', 0);
  const thresholdMs = ms(env, 'NDIF_ONDEMAND_AUTOSCALE_THRESHOLD_MS', 1);
  const backoffMs = ms(env, 'NDIF_ONDEMAND_AUTOSCALE_BACKOFF_MS', 0);
  if (minDeploymentMs !== undefined) out.minDeploymentMs = minDeploymentMs;
  if (thresholdMs !== undefined || backoffMs !== undefined) {
    out.autoscale = {
      ...(thresholdMs === undefined ? {} : { thresholdMs }),
      ...(backoffMs === undefined ? {} : { backoffMs }),
    };
  }
  return out;
}
