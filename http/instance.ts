// A fastify instance for one of the APIs, with the shared edge installed and the common routes registered.
import Fastify, { type FastifyInstance } from 'fastify';
import { BASE_CAPABILITIES, commonRoutes } from './common-routes.js';
import { routeDeps, type ApiContext, type RouteDeps } from './deps.js';
import { installEdge } from './edge.js';
import { fastifyOptions } from './fastify-options.js';
import { httpMetrics } from '../metrics/http.js';

export function newApiInstance(ctx: ApiContext, api: RouteDeps['api']): { app: FastifyInstance; deps: RouteDeps } {
  const deps = routeDeps(ctx, api);
  const app = Fastify(fastifyOptions(deps.config, ctx.log)) as unknown as FastifyInstance;
  installEdge(app, { config: deps.config, keys: deps.keys, clock: ctx.clock, authThrottle: deps.authThrottle });
  for (const c of BASE_CAPABILITIES) deps.capabilities.add(c);
  commonRoutes(app, deps);
  if (ctx.metrics !== undefined) {
    deps.capabilities.add('metrics');
    httpMetrics(app, ctx.metrics, (key) => ctx.catalog.get(key) !== undefined);
  }
  return { app, deps };
}
