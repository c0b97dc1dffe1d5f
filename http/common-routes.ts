// Routes both APIs serve: /ping, /version (the handshake), /ready, /whoami.
import type { FastifyInstance } from 'fastify';
import { API_PROTOCOL_VERSION, COMPATIBILITY_RULE } from '../protocol/api-version.js';
import { FabricError } from '../protocol/errors.js';
import { callerOf } from './access.js';
import type { RouteDeps } from './deps.js';
import { nowIso } from './deps.js';
import { ApiErrorCode } from './errors.js';
import { fabricVersion } from './fabric-version.js';
import { limitsOf } from './key-limits.js';

export const BASE_CAPABILITIES = ['operator', 'api-keys'];

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const why = (e: unknown) => (e instanceof Error ? e.message : String(e));

export function commonRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx, config } = deps;

  app.get('/ping', { config: { access: 'public' } }, async () => ({ ok: true, at: nowIso(ctx) }));

  app.get('/version', { config: { access: 'public' } }, async () => ({
    fabric: fabricVersion(),
    protocol: API_PROTOCOL_VERSION,
    api: deps.api,
    compatibility: COMPATIBILITY_RULE,
    capabilities: [...deps.capabilities].sort(),
    limits: {
      bodyLimitBytes: config.bodyLimitBytes,
      inlineResultMaxBytes: config.inlineResultMaxBytes,
      wsBinaryResultMaxBytes: config.wsBinaryResultMaxBytes,
      resultUrlTtlMs: config.resultUrlTtlMs,
      rateLimit: config.rateLimit,
      downloadRateLimit: config.downloadRateLimit,
      keyLimits: config.auth ? config.keyLimits : null,
    },
    auth: config.auth,
  }));

  app.get('/ready', { config: { access: 'public' } }, async (req, reply) => {
    const problems: Record<string, string> = {};
    let head: number | undefined;
    try {
      head = await withTimeout(ctx.store.headPosition(), config.readyTimeoutMs, 'the event store');
    } catch (e) {
      problems.store = why(e);
    }
    if (head !== undefined) {
      try {
        await ctx.view.catchUp(config.readyTimeoutMs);
      } catch (e) {
        problems.projection = `${why(e)} (at ${ctx.view.position} of ${head})`;
      }
    }
    let keys: 'ok' | 'off' = 'off';
    if (config.auth && deps.keys !== undefined) {
      try {
        await withTimeout(deps.keys.store.ping(), config.readyTimeoutMs, 'the API key store');
        keys = 'ok';
      } catch (e) {
        problems.keys = why(e);
      }
    }
    if (Object.keys(problems).length > 0) {
      const text = Object.entries(problems)
        .map(([k, v]) => `${k}: ${v}`)
        .join('; ');
      const err = new FabricError(ApiErrorCode.notReady, 503, `not ready: ${text}`, {
        hint: 'wait, or check the part named',
        details: problems,
      });
      req.log.warn({ problems }, `GET /ready: ${err.message}`);
      return reply.code(503).send(err.toBody());
    }
    return { ready: true, store: 'ok', projection: { position: ctx.view.position, head }, keys };
  });

  app.get('/whoami', async (req) => {
    const me = callerOf(req);
    return {
      actor: me.actor,
      keyId: me.keyId,
      label: me.label,
      tags: me.tags,
      auth: me.auth,
      limits: limitsOf(me, config),
    };
  });
}
