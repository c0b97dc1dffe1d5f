// A caller's effective limits: its key's own limit tags over the fabric's defaults (auth on); none with auth off
// (one caller, who owns the machine).
import type { KeyLimits } from '../auth/port.js';
import type { Identity } from '../auth/keys.js';
import type { ApiConfig } from './config.js';

export type EffectiveLimits = { [K in keyof Required<KeyLimits>]: number | null };

const NONE: EffectiveLimits = Object.freeze({
  maxTimeoutMs: null,
  maxQueued: null,
  maxRunning: null,
  storageQuotaBytes: null,
});

export function limitsOf(me: Identity, config: ApiConfig): EffectiveLimits {
  if (!me.auth) return NONE;
  return { ...config.keyLimits, ...me.tags.limits };
}
