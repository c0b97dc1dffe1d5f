// The embedded fabric's HTTP server: the command API and the query API on one fastify instance (one port).
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../../http/deps.js';
import { registerQueryRoutes, type QueryApiOptions } from '../../query-api/build.js';
import { newApiInstance } from '../../http/instance.js';
import { registerCommandRoutes } from '../../command-api/http/build.js';

export type FabricServerOptions = QueryApiOptions;

export async function buildFabricServer(ctx: ApiContext, options: FabricServerOptions = {}): Promise<FastifyInstance> {
  const { app, deps } = newApiInstance(ctx, 'embedded');
  registerCommandRoutes(app, deps);
  await registerQueryRoutes(app, deps, options);
  return app;
}
