// The GPU agent's settings, read from its environment:
//   NDIF_AGENT_ID            the agent's id (default: the host name); the same id across restarts is one agent
//   NDIF_AGENT_GPUS          GPUs it declares: `<n>x<size>` (2x24GiB) or a list of sizes (24GiB,16GiB). Default 1x16GiB.
//                            On a CPU-only host they are virtual: placement counts their memory, onnxruntime runs on the CPU.
//   NDIF_AGENT_RAM           node RAM it declares (default: the host's total memory)
//   NDIF_AGENT_CPU_CACHE     CPU memory for WARM replicas (default: 90 % of the RAM, decided by the control plane)
//   NDIF_AGENT_HEARTBEAT_MS  heartbeat interval (default 2000; the scheduler's timeout is 6000)
//   NDIF_AGENT_MAX_RUN_MS    limit for a request that has none of its own (default 3600000)
//   NDIF_LOG_MAX_LINES, NDIF_LOG_MAX_BYTES  what one attempt may log (defaults 10000 lines, 1 MiB; the control plane
//                            enforces the same settings, the agent stops sending at them)
//   NDIF_RESULT_MAX_BYTES    largest encoded result of one request (default 64 MiB; larger: RESULT_TOO_LARGE)
//   NDIF_RESULT_STREAM_MIN_BYTES  results this large are written piece by piece and can be read meanwhile (default
//                            16MiB; 0: every result is one put)
//   NDIF_AGENT_EP            cpu (default) | cuda: onnxruntime's execution provider; cuda refuses to start where
//                            onnxruntime-node's CUDA binaries are not installed (AGENT_CUDA_UNAVAILABLE)
//   NDIF_AGENT_PROVIDER      the older name: auto (CUDA when its binaries are installed, else CPU) | cpu | cuda
//   NDIF_TOPIC_ASSIGNMENTS, NDIF_TOPIC_AGENT_EVENTS   topic names (defaults ndif.assignments, ndif.agent-events)
//   NDIF_AGENT_STATE_DIR     where the agent keeps its last words for its next boot (default <tmp>/ndif-agent)
//   NDIF_AGENT_BATCH_ROWS    most rows one batch of requests stacks into a forward pass (default 64; 1: no batching)
//   NDIF_AGENT_PREFIX_CACHE  bytes of pass prefixes one session keeps for its later traces (default 256MiB; 0: no reuse)
//   NDIF_AGENT_STALL_MS      the watchdog ends a process whose event loop is blocked this long (default 20000; 0: off)
//   NDIF_AGENT_MEMORY_MAX    the agent's RSS at which a trusted block is stopped as OutOfMemory (default: 90 % of its cgroup's limit)
//   NDIF_AGENT_MEMORY_FLOOR  the host's available memory at which the same happens (default max(256MiB, 5 % of RAM))
//   NDIF_AGENT_PREVIOUS_EXIT set by a supervisor that restarts the agent: how the previous process ended (JSON)
import { hostname, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import type { GpuSpec } from '../../domain/events/agent.js';
import { ENTITY_ID } from '../../domain/shared/ids.js';
import { relayTopicsFromEnv, type RelayTopics } from '../../transport/relay/wire.js';
import { agentConfigInvalid, cudaUnavailable } from './errors.js';
import { parseBytes } from './sizes.js';
import { DEFAULT_RESULT_STREAM_MIN_BYTES } from './result-store.js';
import { logLimitsFromEnv, type LogLimits } from '../../protocol/log-limits.js';

export type ProviderChoice = 'auto' | 'cpu' | 'cuda';

export interface AgentConfig {
  agentId: string;
  gpus: GpuSpec[];
  ramBytes: number;
  cpuCacheBudgetBytes?: number;
  heartbeatMs: number;
  maxRunMs: number;
  provider: ProviderChoice;
  topics: RelayTopics;
  stateDir: string;
  /** 0: no watchdog. */
  stallMs: number;
  /** Most rows a batch of requests stacks (gpu-agent/runtime/serving/batcher.ts); 1: no batching. */
  batchRows: number;
  /** Bytes of pass prefixes one session keeps for its later traces (gpu-agent/runtime/interleave/prefix-reuse.ts). */
  prefixCacheBytes: number | undefined;
  /** The agent's RSS above which the block running in it is stopped (OutOfMemory); undefined: the cgroup's, if any. */
  memoryMaxBytes: number | undefined;
  /** The host's available memory below which the same happens (before the kernel's OOM killer acts). */
  memoryFloorBytes: number;
  logLimits: LogLimits;
  resultMaxBytes: number;
  /** NDIF_RESULT_STREAM_MIN_BYTES: results this large are written piece by piece and readable meanwhile; 0: none. */
  resultStreamMinBytes: number;
  /** NDIF_LOG_LINES_PER_S: how fast one request's log lines leave the agent. */
  logLinesPerSecond: number;
  /** NDIF_PROGRESS_INTERVAL_MS: least time between two progress reports (TRACE) of a loop. */
  progressIntervalMs: number;
  /** NDIF_AGENT_START_HOLD_MS: how long a run's start report waits to go with its end (0: sent at once). */
  startHoldMs: number;
}

export const DEFAULT_RESULT_MAX_BYTES = 64 * 1024 * 1024;
/** A request's log lines per second out of the agent: the rate the control plane keeps up with while answering HTTP within 10 ms on 2 cores (bench/tenants.ts). */
export const DEFAULT_LOG_LINES_PER_S = 60_000;
/**
 * A run's start report waits this long to go with its end: a run that ends sooner costs the control plane one report,
 * one decision and one append instead of two (a trivial request's CPU there, bench/overhead.ts); RUNNING shows this
 * much later for a longer run.
 */
export const DEFAULT_START_HOLD_MS = 20;

/** `2x24GiB` → two GPUs of 24 GiB; `24GiB,16GiB` → two GPUs of those sizes. */
export function parseGpus(spec: string, name: string): GpuSpec[] | undefined {
  const counted = /^\s*([0-9]+)\s*x\s*(.+)$/i.exec(spec);
  let sizes: (number | undefined)[];
  if (counted) {
    const n = Number(counted[1]);
    if (!Number.isInteger(n) || n < 1 || n > 64) return undefined;
    sizes = Array.from({ length: n }, () => parseBytes(counted[2]));
  } else {
    sizes = spec.split(',').map((s) => parseBytes(s));
  }
  if (sizes.length === 0 || sizes.length > 64 || sizes.some((s) => s === undefined)) return undefined;
  return sizes.map((memoryBytes, index) => ({ index, memoryBytes: memoryBytes!, name }));
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < min) throw agentConfigInvalid(name, raw, `an integer >= ${min}`);
  return n;
}

function bytes(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const b = parseBytes(raw);
  if (b === undefined) throw agentConfigInvalid(name, raw, 'a size such as 64GiB, 512MiB or a byte count');
  return b;
}

function readLogLimits(env: NodeJS.ProcessEnv): LogLimits {
  try {
    return logLimitsFromEnv(env);
  } catch (e) {
    const name = /NDIF_LOG_MAX_\w+/.exec((e as Error).message)?.[0] ?? 'NDIF_LOG_MAX_LINES';
    throw agentConfigInvalid(name, env[name] ?? '', 'a positive integer');
  }
}

/** NDIF_AGENT_EP (cpu | cuda, default cpu), or the older NDIF_AGENT_PROVIDER (auto | cpu | cuda). */
function providerFromEnv(env: NodeJS.ProcessEnv, cuda: boolean): ProviderChoice {
  const ep = env.NDIF_AGENT_EP;
  const legacy = env.NDIF_AGENT_PROVIDER;
  if (ep !== undefined && ep !== '') {
    if (ep !== 'cpu' && ep !== 'cuda') throw agentConfigInvalid('NDIF_AGENT_EP', ep, 'cpu or cuda');
    if (legacy !== undefined && legacy !== '' && legacy !== 'auto' && legacy !== ep) {
      throw agentConfigInvalid('NDIF_AGENT_PROVIDER', legacy, `the same as NDIF_AGENT_EP (${ep}), or unset`);
    }
    if (ep === 'cuda' && !cuda) throw cudaUnavailable();
    return ep;
  }
  const provider = (legacy || 'cpu') as ProviderChoice;
  if (!['auto', 'cpu', 'cuda'].includes(provider))
    throw agentConfigInvalid('NDIF_AGENT_PROVIDER', provider, 'auto, cpu or cuda');
  if (provider === 'cuda' && !cuda) throw cudaUnavailable();
  return provider;
}

export function agentConfigFromEnv(env: NodeJS.ProcessEnv = process.env, cuda = false): AgentConfig {
  const agentId = env.NDIF_AGENT_ID || hostname().replace(/[^A-Za-z0-9._:-]/g, '-');
  if (!ENTITY_ID.test(agentId))
    throw agentConfigInvalid(
      'NDIF_AGENT_ID',
      agentId,
      'letters, digits and . _ : - (up to 128), starting with a letter or digit',
    );
  const provider = providerFromEnv(env, cuda);
  const onCuda = provider === 'cuda' || (provider === 'auto' && cuda);
  const spec = env.NDIF_AGENT_GPUS || '1x16GiB';
  const gpus = parseGpus(spec, onCuda ? 'cuda' : 'virtual (cpu)');
  if (gpus === undefined)
    throw agentConfigInvalid(
      'NDIF_AGENT_GPUS',
      spec,
      '<count>x<size> (2x24GiB) or sizes separated by commas (24GiB,16GiB), at most 64 GPUs',
    );
  const ramBytes = bytes(env, 'NDIF_AGENT_RAM') ?? totalmem();
  const cache = bytes(env, 'NDIF_AGENT_CPU_CACHE');
  if (cache !== undefined && cache > ramBytes)
    throw agentConfigInvalid('NDIF_AGENT_CPU_CACHE', env.NDIF_AGENT_CPU_CACHE!, `at most the RAM (${ramBytes} bytes)`);
  const config: AgentConfig = {
    agentId,
    gpus,
    ramBytes,
    heartbeatMs: int(env, 'NDIF_AGENT_HEARTBEAT_MS', 2000, 100),
    maxRunMs: int(env, 'NDIF_AGENT_MAX_RUN_MS', 3_600_000, 1000),
    provider,
    topics: relayTopicsFromEnv(env),
    stateDir: env.NDIF_AGENT_STATE_DIR || join(tmpdir(), 'ndif-agent'),
    stallMs: int(env, 'NDIF_AGENT_STALL_MS', 20_000, 0),
    batchRows: int(env, 'NDIF_AGENT_BATCH_ROWS', 64, 1),
    prefixCacheBytes: env.NDIF_AGENT_PREFIX_CACHE?.trim() === '0' ? 0 : bytes(env, 'NDIF_AGENT_PREFIX_CACHE'),
    memoryMaxBytes: bytes(env, 'NDIF_AGENT_MEMORY_MAX'),
    memoryFloorBytes: bytes(env, 'NDIF_AGENT_MEMORY_FLOOR') ?? Math.max(256 * 2 ** 20, Math.round(totalmem() * 0.05)),
    logLimits: readLogLimits(env),
    resultMaxBytes: bytes(env, 'NDIF_RESULT_MAX_BYTES') ?? DEFAULT_RESULT_MAX_BYTES,
    resultStreamMinBytes:
      env.NDIF_RESULT_STREAM_MIN_BYTES?.trim() === '0'
        ? 0
        : (bytes(env, 'NDIF_RESULT_STREAM_MIN_BYTES') ?? DEFAULT_RESULT_STREAM_MIN_BYTES),
    logLinesPerSecond: int(env, 'NDIF_LOG_LINES_PER_S', DEFAULT_LOG_LINES_PER_S, 1),
    progressIntervalMs: int(env, 'NDIF_PROGRESS_INTERVAL_MS', 1000, 100),
    startHoldMs: int(env, 'NDIF_AGENT_START_HOLD_MS', DEFAULT_START_HOLD_MS, 0),
  };
  if (config.startHoldMs > 10_000)
    throw agentConfigInvalid('NDIF_AGENT_START_HOLD_MS', env.NDIF_AGENT_START_HOLD_MS!, 'at most 10000 (ms)');
  if (config.stallMs > 0 && config.stallMs < 1000)
    throw agentConfigInvalid('NDIF_AGENT_STALL_MS', env.NDIF_AGENT_STALL_MS!, '0 (no watchdog) or at least 1000');
  if (cache !== undefined) config.cpuCacheBudgetBytes = cache;
  return config;
}
