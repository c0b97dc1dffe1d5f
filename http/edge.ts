// The HTTP edge both APIs share, installed on the root instance before any route: the JSON body parser, the
// admission hook (protocol version, caller identity, operator tag, rate limit, in that order, before the body is
// read) and the error handling.
import type { FastifyInstance } from 'fastify';
import { API_PROTOCOL_VERSION, PROTOCOL_HEADER } from '../protocol/api-version.js';
import type { ApiKeys, Identity } from '../auth/keys.js';
import { operatorRequired } from '../auth/errors.js';
import './access.js';
import type { ApiConfig } from './config.js';
import { installErrorHandling } from './error-handler.js';
import { type AuthFailureThrottle, isAuthFailure } from './auth-throttle.js';
import { identify, presentedKey } from './identify.js';
import { installJsonBody } from './json-body.js';
import { checkClientProtocol } from './protocol-check.js';
import { RateLimiter } from './rate-limit.js';

export interface EdgeDeps {
  config: ApiConfig;
  keys: ApiKeys | undefined;
  clock: () => number;
  authThrottle?: AuthFailureThrottle | undefined;
}

export function installEdge(app: FastifyInstance, deps: EdgeDeps): void {
  const limiter = deps.config.rateLimit === null ? undefined : new RateLimiter(deps.config.rateLimit, deps.clock);
  app.decorateRequest('identity', null);
  app.decorateRequest('freeSlot', null);
  installJsonBody(app);
  installErrorHandling(app, deps.config.bodyLimitBytes);
  app.addHook('onRequest', async (req, reply) => {
    reply.header(PROTOCOL_HEADER, API_PROTOCOL_VERSION);
    if (req.is404) return;
    const access = req.routeOptions.config.access ?? 'user';
    if (access === 'public') return;
    checkClientProtocol(req.headers[PROTOCOL_HEADER]);
    const throttle = deps.authThrottle;
    throttle?.check(req.ip);
    let identity: Identity | null;
    try {
      identity = await identify(deps.config.auth, deps.keys, presentedKey(req.headers), access === 'optional');
    } catch (e) {
      if (throttle !== undefined && isAuthFailure(e))
        throttle.failed(req.ip, e, `${req.method} ${req.routeOptions.url}`);
      throw e;
    }
    req.identity = identity;
    if (identity === null) return;
    if (access === 'operator' && !identity.tags.operator) throw operatorRequired(identity.actor);
    if (limiter !== undefined && access !== 'optional') {
      // A websocket upgrade is one call; the socket it opens is not a call in flight.
      // The in-flight slot is freed when the response closes (answered, or the client went away), or before.
      const free = limiter.take(identity.actor, req.headers.upgrade === undefined);
      reply.raw.once('close', free);
      req.freeSlot = free;
    }
  });
}
