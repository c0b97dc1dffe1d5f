// Deployment settings as an operator gives them (partial) and as they are recorded (resolved, with defaults).
import type { DeploymentSettings } from '../events/index.js';
import { DEFAULT_BIAS_BYTES, DEFAULT_PADDING_FACTOR, modelSizeBytes } from '../placement/size.js';
import { DomainErrorCode as C, refuse } from '../shared/errors.js';

export const DEFAULT_MIN_DEPLOYMENT_MS = 3_600_000;
/** Execution limit of a request on a deployment that names none (NDIF-like); an explicit null means no limit. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/**
 * Requests a replica runs at once unless the deployment says otherwise: the agent interleaves them and takes their
 * forward work in turn, so a request parked in its own code (waiting on something of its own) holds no one else.
 */
export const DEFAULT_CONCURRENCY = 4;
export const DEFAULT_AUTOSCALE = { enabled: true, thresholdMs: 30_000, maxReplicas: 3, backoffMs: 120_000 } as const;

export interface DeploymentSettingsInput {
  /** Bytes of the model's weights (from the ONNX file). */
  weightsBytes: number;
  paddingFactor?: number;
  biasBytes?: number;
  /** Overrides weights × (1 + padding) + bias. */
  sizeBytes?: number;
  gpus?: number;
  dtype?: string;
  /** Default DEFAULT_TIMEOUT_MS (60 s); null: no limit of the deployment's own (the key's maximum still applies). */
  timeoutMs?: number | null;
  concurrency?: number;
  minDeploymentMs?: number;
  autoscale?: Partial<DeploymentSettings['autoscale']>;
}

function check(ok: boolean, field: string, message: string): void {
  if (!ok) refuse(C.invalidSettings, `deployment setting ${field} ${message}`, undefined, { field });
}

const isInt = (v: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  Number.isSafeInteger(v) && v >= min && v <= max;

export function resolveSettings(input: DeploymentSettingsInput): DeploymentSettings {
  const paddingFactor = input.paddingFactor ?? DEFAULT_PADDING_FACTOR;
  const biasBytes = input.biasBytes ?? DEFAULT_BIAS_BYTES;
  check(isInt(input.weightsBytes, 0), 'weightsBytes', 'must be an integer >= 0 (bytes of the weights)');
  check(
    Number.isFinite(paddingFactor) && paddingFactor >= 0 && paddingFactor <= 10,
    'paddingFactor',
    'must be a number from 0 to 10 (0.15 = 15 % headroom)',
  );
  check(isInt(biasBytes, 0), 'biasBytes', 'must be an integer >= 0');
  const sizeBytes = input.sizeBytes ?? modelSizeBytes(input.weightsBytes, paddingFactor, biasBytes);
  check(isInt(sizeBytes, 1), 'sizeBytes', 'must be an integer >= 1 (bytes of GPU memory in all)');
  const gpus = input.gpus ?? 1;
  check(isInt(gpus, 1, 16), 'gpus', 'must be an integer from 1 to 16');
  const dtype = input.dtype ?? 'float32';
  check(
    typeof dtype === 'string' && /^[a-z0-9]{1,32}$/.test(dtype),
    'dtype',
    'must be a type name such as float32 or float16',
  );
  const timeoutMs = input.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : input.timeoutMs;
  check(timeoutMs === null || isInt(timeoutMs, 1), 'timeoutMs', 'must be a positive integer (ms) or null');
  const concurrency = input.concurrency ?? DEFAULT_CONCURRENCY;
  check(isInt(concurrency, 1, 64), 'concurrency', 'must be an integer from 1 to 64 (requests a replica runs at once)');
  const minDeploymentMs = input.minDeploymentMs ?? DEFAULT_MIN_DEPLOYMENT_MS;
  check(isInt(minDeploymentMs, 0), 'minDeploymentMs', 'must be an integer >= 0 (ms)');
  const a = { ...DEFAULT_AUTOSCALE, ...input.autoscale };
  check(typeof a.enabled === 'boolean', 'autoscale.enabled', 'must be true or false');
  check(isInt(a.thresholdMs, 1), 'autoscale.thresholdMs', 'must be a positive integer (ms)');
  check(isInt(a.maxReplicas, 1, 64), 'autoscale.maxReplicas', 'must be an integer from 1 to 64');
  check(isInt(a.backoffMs, 0), 'autoscale.backoffMs', 'must be an integer >= 0 (ms)');
  return {
    weightsBytes: input.weightsBytes,
    paddingFactor,
    biasBytes,
    sizeBytes,
    gpus,
    dtype,
    timeoutMs,
    concurrency,
    minDeploymentMs,
    autoscale: a,
  };
}
