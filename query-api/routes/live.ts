// GET /live: everything the status page shows, in one answer (query-api/live/snapshot.ts). The page reads it again
// whenever the status websocket's cluster watch says something changed.
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../http/access.js';
import type { RouteDeps } from '../../http/deps.js';
import { ChangeExplainer } from '../live/explain.js';
import { RecentChanges } from '../live/recent-changes.js';
import { liveSnapshot } from '../live/snapshot.js';
import { Timelines } from '../live/timeline.js';

export function liveRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;
  deps.capabilities.add('live-page');
  const parts = {
    recent: new RecentChanges(ctx.view, ctx.store, ctx.clock),
    explainer: new ChangeExplainer(ctx.store),
    timelines: new Timelines((id, fromRevision) => ctx.store.readStream(id, { fromRevision })),
  };
  app.addHook('onClose', async () => parts.recent.close());
  app.get('/live', async (req) => liveSnapshot(ctx, parts, callerOf(req)));
}
