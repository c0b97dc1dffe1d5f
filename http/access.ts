// Who may call a route, declared in the route's `config.access`: 'public' (no key, no protocol check: /ping,
// /version, /ready, the status page), 'optional' (a key is checked when sent: signed result downloads),
// 'user' (the default: a key when auth is on) and 'operator' (a key with the operator tag).
import type { Identity } from '../auth/keys.js';

export type Access = 'public' | 'optional' | 'user' | 'operator';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
  }
  interface FastifyRequest {
    /** The caller; null on public routes and on optional ones called without a key. */
    identity: Identity | null;
    /**
     * Frees the call's in-flight slot of the rate limit before its answer (null: it holds none): a call that waits
     * for something else (a submission waiting for its request's final status) is not work in flight.
     */
    freeSlot: (() => void) | null;
  }
}

/** The caller of a route that is not public (the edge's hook has set it). */
export function callerOf(req: { identity: Identity | null }): Identity {
  if (req.identity === null)
    throw new TypeError('callerOf on a route without an identity (declare it access: user or operator)');
  return req.identity;
}
