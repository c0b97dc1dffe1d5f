// The knobs that compress the scheduler's time (fabric/scheduler-env.ts, the embedded fabric's config): unset is
// the defaults, set values are taken as they are, bad values stop the process with FABRIC_CONFIG_INVALID naming
// the variable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { embeddedConfigFromEnv } from '../../fabric/embedded/config.js';
import { onDemandDefaultsFromEnv, schedulerConfigFromEnv } from '../../fabric/scheduler-env.js';

test('unset knobs leave the defaults', () => {
  assert.deepEqual(schedulerConfigFromEnv({}), {});
  assert.deepEqual(onDemandDefaultsFromEnv({}), {});
  const c = embeddedConfigFromEnv({});
  assert.equal(c.agentRestartMs, 500);
  assert.equal(c.agentRestartResetMs, 60_000);
});

test('set knobs are read as milliseconds', () => {
  assert.deepEqual(
    schedulerConfigFromEnv({
      NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS: '1500',
      NDIF_SCHEDULER_AGENT_GRACE_MS: '4000',
      NDIF_SCHEDULER_AUTOSCALE_CHECK_MS: '250',
      NDIF_SCHEDULER_TICK_MS: '100',
    }),
    { heartbeatTimeoutMs: 1500, agentGraceMs: 4000, autoscaleCheckMs: 250, tickMs: 100 },
  );
  assert.deepEqual(
    onDemandDefaultsFromEnv({ NDIF_ONDEMAND_MIN_DEPLOYMENT_MS: '0', NDIF_ONDEMAND_AUTOSCALE_THRESHOLD_MS: '800' }),
    { minDeploymentMs: 0, autoscale: { thresholdMs: 800 } },
  );
  const c = embeddedConfigFromEnv({ NDIF_AGENT_RESTART_MS: '100', NDIF_AGENT_RESTART_RESET_MS: '2000' });
  assert.deepEqual([c.agentRestartMs, c.agentRestartResetMs], [100, 2000]);
});

test('bad values are FABRIC_CONFIG_INVALID naming the variable', () => {
  const refused = (f: () => unknown, name: string) =>
    assert.throws(
      f,
      (e: unknown) => (e as { code?: string }).code === 'FABRIC_CONFIG_INVALID' && (e as Error).message.includes(name),
    );
  refused(() => schedulerConfigFromEnv({ NDIF_SCHEDULER_TICK_MS: 'fast' }), 'NDIF_SCHEDULER_TICK_MS');
  refused(
    () => schedulerConfigFromEnv({ NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS: '0' }),
    'NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS',
  );
  refused(() => schedulerConfigFromEnv({ NDIF_SCHEDULER_AGENT_GRACE_MS: '-1' }), 'NDIF_SCHEDULER_AGENT_GRACE_MS');
  refused(
    () => onDemandDefaultsFromEnv({ NDIF_ONDEMAND_AUTOSCALE_BACKOFF_MS: '1.5' }),
    'NDIF_ONDEMAND_AUTOSCALE_BACKOFF_MS',
  );
  refused(() => embeddedConfigFromEnv({ NDIF_AGENT_RESTART_MS: '5' }), 'NDIF_AGENT_RESTART_MS');
});
