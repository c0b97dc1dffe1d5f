// Settings of the HTTP APIs (both the command and the query API), with their defaults and their environment
// variables (docs/http-api.md, docs/operating.md).
import { randomBytes } from 'node:crypto';
import { FabricError } from '../protocol/errors.js';
import type { KeyLimits } from '../auth/port.js';

export interface RateLimitConfig {
  /** Tokens added per second (sustained calls per second per caller). */
  perSecond: number;
  /** Bucket size (calls allowed in a burst). */
  burst: number;
  /** Calls of one caller being served at once; more are refused at once (however fast the server drains). */
  maxInFlight?: number;
}

export const MIB = 1024 * 1024;

export interface ApiConfig {
  /** API keys required (true), or every caller is `local` (false, the embedded default). */
  auth: boolean;
  /** Largest request body accepted (413 API_BODY_TOO_LARGE above). */
  bodyLimitBytes: number;
  /** Per-caller token bucket and calls in flight; null: no limit. Default 20/s, bursts of 40, 16 in flight, with
   * auth on (below the service rate measured here, ~45 submits/s, so it holds); none with auth off (there are no
   * keys to tell callers apart), unless given. */
  rateLimit: RateLimitConfig | null;
  /** Failed authentications (no key, a malformed, unknown or revoked key) per source address: once a source has
   * used its burst, its calls are refused with 429 API_AUTH_THROTTLED before any key is checked, until the
   * bucket refills. Default 1/s, bursts of 10 (with auth on); null: no throttle. */
  authFailureLimit: RateLimitConfig | null;
  /** Result downloads per submitter of the result (signed URLs included: sharing a URL does not multiply it). */
  downloadRateLimit: RateLimitConfig | null;
  /** Every key's limits unless its own limit tags say otherwise (applied with auth on). */
  keyLimits: Required<KeyLimits>;
  /** Largest tensor one PUT /tensors/:name may upload (413 API_TENSOR_TOO_LARGE above). */
  tensorMaxBytes: number;
  /** How long an uploaded tensor is kept after its upload; null: until deleted. */
  tensorRetentionMs: number | null;
  /** Results up to this size are sent inline (base64); larger ones by a signed URL. */
  inlineResultMaxBytes: number;
  /**
   * On a status websocket subscription that asks for binary results: results up to this size follow their COMPLETED
   * message as one binary frame; larger ones by a signed URL.
   */
  wsBinaryResultMaxBytes: number;
  /** Lifetime of a signed result URL. */
  resultUrlTtlMs: number;
  /** HMAC key of result download tokens (random per process unless given: share it between query API replicas). */
  resultSecret: Buffer;
  /** Base URL put in front of result URLs (e.g. https://ndif.example.org); null: URLs are relative paths. */
  publicUrl: string | null;
  /** How long GET /ready waits for the projection to apply everything stored. */
  readyTimeoutMs: number;
  /** Subscriptions one websocket may hold. */
  wsMaxSubscriptions: number;
  /** A websocket whose unsent bytes exceed this is closed (a client that does not read). */
  wsMaxBufferedBytes: number;
}

export const DEFAULT_API_CONFIG: Omit<ApiConfig, 'resultSecret'> = {
  auth: false,
  bodyLimitBytes: 4 * MIB,
  rateLimit: { perSecond: 20, burst: 40, maxInFlight: 16 },
  downloadRateLimit: { perSecond: 5, burst: 20 },
  authFailureLimit: { perSecond: 1, burst: 10 },
  keyLimits: { maxTimeoutMs: 600_000, maxQueued: 200, maxRunning: 8, storageQuotaBytes: 1024 * MIB },
  tensorMaxBytes: 512 * MIB,
  tensorRetentionMs: 7 * 24 * 3_600_000,
  inlineResultMaxBytes: 4 * MIB,
  wsBinaryResultMaxBytes: 32 * MIB,
  resultUrlTtlMs: 3_600_000,
  publicUrl: null,
  readyTimeoutMs: 2000,
  wsMaxSubscriptions: 1000,
  wsMaxBufferedBytes: 64 * MIB,
};

export type ApiConfigInput = Partial<Omit<ApiConfig, 'resultSecret' | 'keyLimits'>> & {
  resultSecret?: Buffer | string;
  keyLimits?: KeyLimits;
};

function invalid(name: string, message: string): FabricError {
  return new FabricError('API_CONFIG_INVALID', 500, `API setting ${name} ${message}`, {
    hint: `fix ${name}`,
    details: { setting: name },
  });
}

const positiveInt = (v: number, name: string): number => {
  if (!Number.isSafeInteger(v) || v <= 0) throw invalid(name, `must be a positive integer, got ${String(v)}`);
  return v;
};

/** Fills in defaults and checks every setting; throws API_CONFIG_INVALID naming the first bad one. */
export function resolveApiConfig(input: ApiConfigInput = {}): ApiConfig {
  const c = { ...DEFAULT_API_CONFIG, ...input };
  if (input.rateLimit === undefined && !c.auth) c.rateLimit = null;
  positiveInt(c.bodyLimitBytes, 'bodyLimitBytes');
  positiveInt(c.tensorMaxBytes, 'tensorMaxBytes');
  positiveInt(c.inlineResultMaxBytes, 'inlineResultMaxBytes');
  positiveInt(c.wsBinaryResultMaxBytes, 'wsBinaryResultMaxBytes');
  positiveInt(c.resultUrlTtlMs, 'resultUrlTtlMs');
  positiveInt(c.readyTimeoutMs, 'readyTimeoutMs');
  positiveInt(c.wsMaxSubscriptions, 'wsMaxSubscriptions');
  positiveInt(c.wsMaxBufferedBytes, 'wsMaxBufferedBytes');
  for (const [name, rl] of [
    ['rateLimit', c.rateLimit],
    ['downloadRateLimit', c.downloadRateLimit],
    ['authFailureLimit', c.authFailureLimit],
  ] as const) {
    if (rl === null) continue;
    if (!(rl.perSecond > 0) || !Number.isFinite(rl.perSecond))
      throw invalid(`${name}.perSecond`, 'must be a positive number');
    positiveInt(rl.burst, `${name}.burst`);
    if (rl.maxInFlight !== undefined) positiveInt(rl.maxInFlight, `${name}.maxInFlight`);
  }
  const keyLimits: Required<KeyLimits> = { ...DEFAULT_API_CONFIG.keyLimits, ...input.keyLimits };
  for (const [k, v] of Object.entries(keyLimits)) positiveInt(v, `keyLimits.${k}`);
  if (c.publicUrl !== null && !/^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(c.publicUrl))
    throw invalid('publicUrl', `must be an http(s) URL, got ${JSON.stringify(c.publicUrl)}`);
  const secret =
    input.resultSecret === undefined
      ? randomBytes(32)
      : typeof input.resultSecret === 'string'
        ? Buffer.from(input.resultSecret, 'utf8')
        : input.resultSecret;
  if (secret.length < 16) throw invalid('resultSecret', 'must be at least 16 bytes');
  return {
    ...c,
    keyLimits,
    publicUrl: c.publicUrl === null ? null : c.publicUrl.replace(/\/+$/, ''),
    resultSecret: secret,
  };
}

/**
 * Reads the settings from the environment: NDIF_AUTH (on|off), NDIF_BODY_LIMIT_BYTES, NDIF_RATE_LIMIT and
 * NDIF_DOWNLOAD_RATE_LIMIT (`<perSecond>/<burst>[/<maxInFlight>]` or off), NDIF_KEY_MAX_TIMEOUT_MS,
 * NDIF_KEY_MAX_QUEUED, NDIF_KEY_MAX_RUNNING, NDIF_KEY_STORAGE_QUOTA_BYTES (every key's default limits), NDIF_TENSOR_MAX_BYTES, NDIF_TENSOR_RETENTION_MS (0: kept until deleted), NDIF_INLINE_RESULT_MAX_BYTES, NDIF_RESULT_URL_TTL_S, NDIF_RESULT_SECRET,
 * NDIF_PUBLIC_URL. Unset variables keep the defaults.
 */
export function apiConfigFromEnv(env: NodeJS.ProcessEnv = process.env, base: ApiConfigInput = {}): ApiConfig {
  const out: ApiConfigInput = { ...base };
  const int = (name: string): number | undefined => {
    const v = env[name];
    if (v === undefined || v === '') return undefined;
    if (!/^[0-9]+$/.test(v)) throw invalid(name, `must be a positive integer, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  if (env.NDIF_AUTH !== undefined && env.NDIF_AUTH !== '') {
    if (env.NDIF_AUTH !== 'on' && env.NDIF_AUTH !== 'off')
      throw invalid('NDIF_AUTH', `must be on or off, got ${JSON.stringify(env.NDIF_AUTH)}`);
    out.auth = env.NDIF_AUTH === 'on';
  }
  const body = int('NDIF_BODY_LIMIT_BYTES');
  if (body !== undefined) out.bodyLimitBytes = body;
  const rate = (name: string): RateLimitConfig | null | undefined => {
    const rl = env[name];
    if (rl === undefined || rl === '') return undefined;
    if (rl === 'off') return null;
    const m = /^([0-9]+(?:\.[0-9]+)?)\/([0-9]+)(?:\/([0-9]+))?$/.exec(rl);
    if (m === null)
      throw invalid(
        name,
        `must be <perSecond>/<burst>[/<maxInFlight>] (e.g. 20/40/16) or off, got ${JSON.stringify(rl)}`,
      );
    return m[3] === undefined
      ? { perSecond: Number(m[1]), burst: Number(m[2]) }
      : { perSecond: Number(m[1]), burst: Number(m[2]), maxInFlight: Number(m[3]) };
  };
  const rl = rate('NDIF_RATE_LIMIT');
  if (rl !== undefined) out.rateLimit = rl;
  const dl = rate('NDIF_DOWNLOAD_RATE_LIMIT');
  if (dl !== undefined) out.downloadRateLimit = dl;
  const af = rate('NDIF_AUTH_FAILURE_LIMIT');
  if (af !== undefined) out.authFailureLimit = af;
  const keyLimits: KeyLimits = { ...base.keyLimits };
  for (const [name, field] of [
    ['NDIF_KEY_MAX_TIMEOUT_MS', 'maxTimeoutMs'],
    ['NDIF_KEY_MAX_QUEUED', 'maxQueued'],
    ['NDIF_KEY_MAX_RUNNING', 'maxRunning'],
    ['NDIF_KEY_STORAGE_QUOTA_BYTES', 'storageQuotaBytes'],
  ] as const) {
    const v = int(name);
    if (v !== undefined) keyLimits[field] = v;
  }
  if (Object.keys(keyLimits).length > 0) out.keyLimits = keyLimits as Required<KeyLimits>;
  const tensorMax = int('NDIF_TENSOR_MAX_BYTES');
  if (tensorMax !== undefined) out.tensorMaxBytes = tensorMax;
  const tensorRetention = int('NDIF_TENSOR_RETENTION_MS');
  if (tensorRetention !== undefined) out.tensorRetentionMs = tensorRetention === 0 ? null : tensorRetention;
  const inline = int('NDIF_INLINE_RESULT_MAX_BYTES');
  if (inline !== undefined) out.inlineResultMaxBytes = inline;
  const binary = int('NDIF_WS_BINARY_RESULT_MAX_BYTES');
  if (binary !== undefined) out.wsBinaryResultMaxBytes = binary;
  const ttl = int('NDIF_RESULT_URL_TTL_S');
  if (ttl !== undefined) out.resultUrlTtlMs = ttl * 1000;
  if (env.NDIF_RESULT_SECRET) out.resultSecret = env.NDIF_RESULT_SECRET;
  if (env.NDIF_PUBLIC_URL) out.publicUrl = env.NDIF_PUBLIC_URL;
  return resolveApiConfig(out);
}
