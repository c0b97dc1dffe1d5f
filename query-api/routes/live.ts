// GET /live: everything the status page shows, in one answer (query-api/live/snapshot.ts). The page reads it again
// whenever the status websocket's cluster watch says something changed. GET /live/series: the page's time series
// (query-api/live/series.ts).
import type { FastifyInstance } from 'fastify';
import { callerOf } from '../../http/access.js';
import type { RouteDeps } from '../../http/deps.js';
import { ChangeExplainer } from '../live/explain.js';
import { RecentChanges } from '../live/recent-changes.js';
import { SeriesRecorder } from '../live/series.js';
import { liveSnapshot } from '../live/snapshot.js';
import { seesAll } from '../ws/connection.js';
import { Timelines } from '../live/timeline.js';

export function liveRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const { ctx } = deps;
  deps.capabilities.add('live-page');
  const parts = {
    recent: new RecentChanges(ctx.view, ctx.store, ctx.clock),
    explainer: new ChangeExplainer(ctx.store),
    timelines: new Timelines((id, fromRevision) => ctx.store.readStream(id, { fromRevision })),
  };
  const series = new SeriesRecorder(ctx.view, ctx.clock);
  series.start();
  app.addHook('onClose', async () => {
    series.stop();
    parts.recent.close();
  });
  app.get('/live', async (req) => liveSnapshot(ctx, parts, callerOf(req)));
  // The page's plots: aggregates over time; GPU memory per GPU for those who see the agents (as GET /live).
  app.get('/live/series', async (req) => {
    const r = series.read();
    if (seesAll(callerOf(req))) return r;
    return { ...r, samples: r.samples.map((x) => ({ ...x, gpuUsedBytes: {}, gpuMemoryBytes: 0 })) };
  });
}
