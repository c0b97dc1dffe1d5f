// The query API: the shared edge and common routes, every read route (QUERY_ROUTES and options.plugins) and the
// status websocket on /ws. Distributed mode runs it as its own process; buildFabricServer mounts it with the
// command API on one port.
import type { FastifyInstance } from 'fastify';
import type { ApiContext, RouteDeps } from '../http/deps.js';
import { newApiInstance } from '../http/instance.js';
import { parseStream } from '../domain/shared/ids.js';
import type { StoredEvent } from '../eventstore/port.js';
import { QUERY_ROUTES, type QueryRoutes } from './routes/index.js';
import { StatusHub } from './ws/hub.js';
import { attachStatusSocket } from './ws/upgrade.js';

export interface QueryApiOptions {
  /** Route modules registered after the built-in ones (forensics, …). */
  plugins?: QueryRoutes[];
}

export const QUERY_CAPABILITIES = [
  'ws-status',
  'ws-since-cursor',
  'inline-results',
  'ws-binary-results',
  'ws-result-stream',
  'ws-final-statuses',
  'result-urls',
  'result-container:NDIFRES1',
];

/** Registers the query routes and the status websocket on an instance whose edge is installed. */
export async function registerQueryRoutes(
  app: FastifyInstance,
  deps: RouteDeps,
  options: QueryApiOptions = {},
): Promise<StatusHub> {
  for (const c of QUERY_CAPABILITIES) deps.capabilities.add(c);
  const { ctx } = deps;
  const hub = new StatusHub(
    ctx.view,
    historyReader(deps),
    (e, where) =>
      ctx.log.error({ err: e }, `status websocket: ${where}: ${e instanceof Error ? e.message : String(e)}`),
    ctx.clock,
  );
  attachStatusSocket(app, deps, hub);
  if (ctx.catchUpBeforeReads === true) {
    app.addHook('preHandler', async (req) => {
      if (req.method === 'GET' || req.method === 'HEAD') await ctx.view.catchUp(deps.config.readyTimeoutMs);
    });
  }
  app.decorate(HUB, hub);
  for (const routes of [...QUERY_ROUTES, ...(options.plugins ?? [])]) await routes(app, deps);
  return hub;
}

/**
 * Where the status websocket reads a request's history for its replay: the event store, or with read models the
 * request's history rows once they include the live view's position (the replay covers events up to it).
 */
function historyReader(deps: RouteDeps): (streamId: string) => Promise<StoredEvent[]> {
  const { ctx } = deps;
  const rm = ctx.readModels?.requests;
  if (rm === undefined) return (streamId) => ctx.store.readStream(streamId);
  return async (streamId) => {
    const stream = parseStream(streamId);
    if (stream?.kind !== 'request') return ctx.store.readStream(streamId);
    await rm.waitForPosition(ctx.view.position, deps.config.readyTimeoutMs);
    return rm.events(stream.id);
  };
}

const HUB = 'ndifStatusHub';

/** The status hub of an instance the query routes were registered on (subscription counts, tests). */
export function statusHubOf(app: FastifyInstance): StatusHub {
  const hub = (app as unknown as Record<string, unknown>)[HUB];
  if (!(hub instanceof StatusHub)) throw new TypeError('this instance has no query API');
  return hub;
}

/** The query API alone (distributed mode). Call `listen` on it; `close` stops it and its websockets. */
export async function buildQueryApi(ctx: ApiContext, options: QueryApiOptions = {}): Promise<FastifyInstance> {
  const { app, deps } = newApiInstance(ctx, 'query');
  await registerQueryRoutes(app, deps, options);
  return app;
}
