// Sandbox settings from the environment, validated once. Bad values are refused with a message naming
// the variable and what it accepts.
import { SandboxError } from './errors.js';

export interface RunnerLimits {
  /** Memory cap of the whole runner process (cgroup or rlimit), MiB. */
  memoryMb: number;
  /** V8 old-space cap (--max-old-space-size), MiB; below memoryMb so V8 fails cleanly before the kernel kills. */
  heapMb: number;
  /** CPU seconds the kernel allows a runner (RLIMIT_CPU): the backstop when the agent is gone and a block spins. */
  cpuSeconds: number;
  /** A runner that is not READY within this many ms is killed and reported. */
  startTimeoutMs: number;
}

export interface SandboxConfig {
  /** Warm runners kept per model; 'auto' sizes the pool from measured spawn and execute times (docs/sandbox.md). */
  poolSize: number | 'auto';
  /** Upper bound for the automatic size. */
  maxPoolSize: number;
  limits: RunnerLimits;
  /** Whether to put each runner in its own network namespace when possible (NDIF_SANDBOX_NETNS=0 turns it off). */
  networkNamespace: boolean;
  /** The unprivileged user and group runners run as when the agent is root (default 65534, nobody). */
  uid: number;
  gid: number;
}

export const DEFAULT_LIMITS: RunnerLimits = { memoryMb: 512, heapMb: 384, cpuSeconds: 300, startTimeoutMs: 10_000 };
export const DEFAULT_MAX_POOL_SIZE = 8;

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 1): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    throw new SandboxError('SANDBOX_CONFIG_INVALID', `${name}=${JSON.stringify(raw)} is not an integer >= ${min}`, {
      hint: `unset ${name} for the default (${fallback}) or give a whole number`,
      details: { variable: name, value: raw },
    });
  }
  return n;
}

export function sandboxConfigFromEnv(env: NodeJS.ProcessEnv = process.env): SandboxConfig {
  const pool = env.NDIF_SANDBOX_POOL_SIZE;
  const poolSize =
    pool === undefined || pool === '' || pool === 'auto' ? 'auto' : positiveInt(env, 'NDIF_SANDBOX_POOL_SIZE', 1, 0);
  const memoryMb = positiveInt(env, 'NDIF_SANDBOX_MEMORY_MB', DEFAULT_LIMITS.memoryMb, 64);
  const heapMb = positiveInt(
    env,
    'NDIF_SANDBOX_HEAP_MB',
    Math.min(DEFAULT_LIMITS.heapMb, Math.floor(memoryMb * 0.75)),
    16,
  );
  if (heapMb >= memoryMb) {
    throw new SandboxError(
      'SANDBOX_CONFIG_INVALID',
      `NDIF_SANDBOX_HEAP_MB (${heapMb}) must be below NDIF_SANDBOX_MEMORY_MB (${memoryMb})`,
      {
        hint: 'leave room for code, buffers and tensors outside the V8 heap',
      },
    );
  }
  return {
    poolSize,
    maxPoolSize: positiveInt(env, 'NDIF_SANDBOX_MAX_POOL_SIZE', DEFAULT_MAX_POOL_SIZE),
    limits: {
      memoryMb,
      heapMb,
      cpuSeconds: positiveInt(env, 'NDIF_SANDBOX_CPU_SECONDS', DEFAULT_LIMITS.cpuSeconds),
      startTimeoutMs: positiveInt(env, 'NDIF_SANDBOX_START_TIMEOUT_MS', DEFAULT_LIMITS.startTimeoutMs),
    },
    networkNamespace: env.NDIF_SANDBOX_NETNS !== '0',
    uid: positiveInt(env, 'NDIF_SANDBOX_UID', 65534),
    gid: positiveInt(env, 'NDIF_SANDBOX_GID', 65534),
  };
}
