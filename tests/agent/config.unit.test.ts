// The agent's settings from its environment: declared GPUs, sizes, defaults and refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentConfigFromEnv, parseGpus } from '../../gpu-agent/agent/config.js';
import { parseBytes } from '../../gpu-agent/agent/sizes.js';

const GIB = 2 ** 30;

test('sizes and GPU declarations', () => {
  assert.equal(parseBytes('24GiB'), 24 * GIB);
  assert.equal(parseBytes('512 MiB'), 512 * 2 ** 20);
  assert.equal(parseBytes('16GB'), 16e9);
  assert.equal(parseBytes('1.5gib'), 1.5 * GIB);
  assert.equal(parseBytes('4096'), 4096);
  for (const bad of ['', 'x', '0', '-1GiB', '12 parsecs']) assert.equal(parseBytes(bad), undefined, bad);
  assert.deepEqual(parseGpus('2x24GiB', 'v'), [
    { index: 0, memoryBytes: 24 * GIB, name: 'v' },
    { index: 1, memoryBytes: 24 * GIB, name: 'v' },
  ]);
  assert.deepEqual(
    parseGpus('24GiB, 16GiB', 'v')?.map((g) => g.memoryBytes),
    [24 * GIB, 16 * GIB],
  );
  for (const bad of ['0x8GiB', '65x1GiB', '2x', 'lots']) assert.equal(parseGpus(bad, 'v'), undefined, bad);
});

test('defaults, CUDA naming and refusals with AGENT_CONFIG_INVALID', () => {
  const c = agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1' });
  assert.equal(c.agentId, 'a-1');
  assert.deepEqual(c.gpus, [{ index: 0, memoryBytes: 16 * GIB, name: 'virtual (cpu)' }]);
  assert.equal(c.heartbeatMs, 2000);
  assert.equal(c.provider, 'cpu', 'NDIF_AGENT_EP defaults to cpu');
  assert.deepEqual(c.topics, { assignments: 'ndif.assignments', agentEvents: 'ndif.agent-events' });
  assert.equal(c.cpuCacheBudgetBytes, undefined);
  assert.equal(c.logLinesPerSecond, 60_000);
  assert.equal(agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1', NDIF_LOG_LINES_PER_S: '500' }).logLinesPerSecond, 500);
  assert.equal(c.startHoldMs, 20);
  assert.equal(agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1', NDIF_AGENT_START_HOLD_MS: '0' }).startHoldMs, 0);
  assert.equal(c.prefixCacheBytes, undefined, "the runtime's default (256 MiB) unless set");
  assert.equal(agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1', NDIF_AGENT_PREFIX_CACHE: '0' }).prefixCacheBytes, 0);
  assert.equal(
    agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1', NDIF_AGENT_PREFIX_CACHE: '64MiB' }).prefixCacheBytes,
    2 ** 26,
  );
  assert.equal(
    agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1' }, true).gpus[0].name,
    'virtual (cpu)',
    'CUDA binaries alone do not switch the provider',
  );
  assert.equal(agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1', NDIF_AGENT_EP: 'cuda' }, true).gpus[0].name, 'cuda');
  assert.equal(
    agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1', NDIF_AGENT_PROVIDER: 'auto' }, true).gpus[0].name,
    'cuda',
    'the older NDIF_AGENT_PROVIDER=auto still picks CUDA where installed',
  );
  assert.equal(agentConfigFromEnv({ NDIF_AGENT_ID: 'a-1', NDIF_AGENT_EP: 'cpu' }, true).provider, 'cpu');
  const d = agentConfigFromEnv({
    NDIF_AGENT_ID: 'a-2',
    NDIF_AGENT_RAM: '64GiB',
    NDIF_AGENT_CPU_CACHE: '32GiB',
    NDIF_TOPIC_ASSIGNMENTS: 'x.a',
    NDIF_AGENT_PROVIDER: 'cpu',
  });
  assert.equal(d.ramBytes, 64 * GIB);
  assert.equal(d.cpuCacheBudgetBytes, 32 * GIB);
  assert.equal(d.topics.assignments, 'x.a');
  assert.equal(d.provider, 'cpu');
  const refused = (env: NodeJS.ProcessEnv, variable: string) =>
    assert.throws(
      () => agentConfigFromEnv(env),
      (e: unknown) =>
        (e as { code?: string }).code === 'AGENT_CONFIG_INVALID' &&
        (e as { details?: { variable?: string } }).details?.variable === variable,
    );
  refused({ NDIF_AGENT_ID: 'bad id!' }, 'NDIF_AGENT_ID');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_GPUS: '3 GPUs' }, 'NDIF_AGENT_GPUS');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_RAM: 'much' }, 'NDIF_AGENT_RAM');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_RAM: '1GiB', NDIF_AGENT_CPU_CACHE: '2GiB' }, 'NDIF_AGENT_CPU_CACHE');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_HEARTBEAT_MS: '5' }, 'NDIF_AGENT_HEARTBEAT_MS');
  refused({ NDIF_AGENT_ID: 'a', NDIF_LOG_LINES_PER_S: '0' }, 'NDIF_LOG_LINES_PER_S');
  refused({ NDIF_AGENT_ID: 'a', NDIF_LOG_LINES_PER_S: 'fast' }, 'NDIF_LOG_LINES_PER_S');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_PREFIX_CACHE: 'lots' }, 'NDIF_AGENT_PREFIX_CACHE');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_START_HOLD_MS: '-1' }, 'NDIF_AGENT_START_HOLD_MS');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_START_HOLD_MS: '10001' }, 'NDIF_AGENT_START_HOLD_MS');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_PROVIDER: 'tpu' }, 'NDIF_AGENT_PROVIDER');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_EP: 'rocm' }, 'NDIF_AGENT_EP');
  refused({ NDIF_AGENT_ID: 'a', NDIF_AGENT_EP: 'cpu', NDIF_AGENT_PROVIDER: 'cuda' }, 'NDIF_AGENT_PROVIDER');
});

test("NDIF_AGENT_EP=cuda without onnxruntime-node's CUDA binaries: AGENT_CUDA_UNAVAILABLE saying what to install", () => {
  for (const env of [{ NDIF_AGENT_EP: 'cuda' }, { NDIF_AGENT_PROVIDER: 'cuda' }]) {
    assert.throws(
      () => agentConfigFromEnv({ NDIF_AGENT_ID: 'a', ...env }, false),
      (e: unknown) => {
        const err = e as { code?: string; message: string; hint?: string };
        assert.equal(err.code, 'AGENT_CUDA_UNAVAILABLE');
        assert.match(err.message, /libonnxruntime_providers_cuda\.so/);
        assert.match(
          err.hint ?? '',
          /ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules\/onnxruntime-node\/script\/install\.js/,
        );
        return true;
      },
    );
  }
});
