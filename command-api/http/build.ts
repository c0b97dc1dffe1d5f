// The command API: a fastify instance with the shared edge (auth, protocol check, rate limit, errors), the common
// routes and the command routes. Distributed mode runs it as its own process; buildFabricServer mounts it with
// the query API on one port.
import type { FastifyInstance } from 'fastify';
import type { ApiContext, RouteDeps } from '../../http/deps.js';
import { newApiInstance } from '../../http/instance.js';

export { newApiInstance };
import { agentRoutes } from './routes/agents.js';
import { deploymentRoutes } from './routes/deployments.js';
import { keyRoutes } from './routes/keys.js';
import { modelCommandRoutes } from './routes/models.js';
import { requestRoutes } from './routes/requests.js';
import { tensorRoutes } from './routes/tensors.js';

export const COMMAND_CAPABILITIES = [
  'submit',
  'client-request-id',
  'idempotent-submit',
  /** POST /requests?waitMs=N answers with the request's final status when it comes within N ms. */
  'submit-wait',
  'cancel',
  'untrusted',
  'generation',
  /** A session's trace may repeat (`repeat`: a loop run on the agent, reported by throttled TRACE statuses). */
  'session-loops',
  'register-models',
  /** PUT /tensors/:name, GET /tensors, DELETE /tensors/:name; a request names them (`tensors`). */
  'tensors',
];

/** Registers the command routes on an instance whose edge is installed. */
export function registerCommandRoutes(app: FastifyInstance, deps: RouteDeps): void {
  for (const c of COMMAND_CAPABILITIES) deps.capabilities.add(c);
  requestRoutes(app, deps);
  deploymentRoutes(app, deps);
  agentRoutes(app, deps);
  keyRoutes(app, deps);
  modelCommandRoutes(app, deps);
  tensorRoutes(app, deps);
}

/** The command API alone (distributed mode). Call `listen` on it; `close` stops it. */
export async function buildCommandApi(ctx: ApiContext): Promise<FastifyInstance> {
  const { app, deps } = newApiInstance(ctx, 'command');
  registerCommandRoutes(app, deps);
  return app;
}
