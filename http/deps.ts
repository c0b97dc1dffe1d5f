// What every route module of both APIs is given, and how a composition root hands it over.
import type { FabricContext } from '../fabric/context.js';
import { ApiKeys } from '../auth/keys.js';
import type { ApiKeyStore } from '../auth/port.js';
import { AuthFailureThrottle } from './auth-throttle.js';
import { resolveApiConfig, type ApiConfig, type ApiConfigInput } from './config.js';

export type ApiKind = 'embedded' | 'command' | 'query';

/** The context a server builder takes: the fabric's parts, the API key store (needed with auth on) and settings. */
export type ApiContext = FabricContext & { keys?: ApiKeyStore; config?: ApiConfigInput };

export interface RouteDeps {
  ctx: FabricContext;
  config: ApiConfig;
  keys: ApiKeys | undefined;
  api: ApiKind;
  /** What /version advertises; route modules may add theirs. */
  capabilities: Set<string>;
  /** Failed authentications per source address (absent with auth off or NDIF_AUTH_FAILURE_LIMIT=off). */
  authThrottle: AuthFailureThrottle | undefined;
}

export function routeDeps(ctx: ApiContext, api: ApiKind): RouteDeps {
  const config = resolveApiConfig(ctx.config);
  if (config.auth && ctx.keys === undefined) {
    throw new TypeError('auth is on but no API key store was given (ctx.keys): every call would be refused');
  }
  return {
    ctx,
    config,
    keys: ctx.keys === undefined ? undefined : new ApiKeys(ctx.keys),
    api,
    capabilities: new Set(),
    authThrottle:
      config.auth && config.authFailureLimit !== null
        ? new AuthFailureThrottle(config.authFailureLimit, ctx.clock, ctx.log, ctx.metrics?.registry)
        : undefined,
  };
}

/** The ISO time of the context's clock. */
export const nowIso = (ctx: FabricContext): string => new Date(ctx.clock()).toISOString();
