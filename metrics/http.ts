// GET /metrics (Prometheus text format) on an API instance, and the HTTP latency of every call it answers:
// ndif_http_request_duration_seconds{method,route,status_code} (route is the matched pattern, e.g.
// /requests/:id; `unmatched` for 404s of unknown paths). A submission answered 2xx is also the request's
// `submit` phase. /metrics needs no key (access public), as Prometheus scrapes without one: expose the port
// only where the scrapers are.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Histogram } from 'prom-client';
import type { FabricMetrics } from './fabric-metrics.js';
import { mergeExposition } from './merge-text.js';
import { SECONDS_BUCKETS } from './registry.js';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export function httpMetrics(app: FastifyInstance, metrics: FabricMetrics, isModel: (key: string) => boolean): void {
  const seconds =
    (metrics.registry.getSingleMetric('ndif_http_request_duration_seconds') as
      | Histogram<'method' | 'route' | 'status_code'>
      | undefined) ??
    new Histogram({
      name: 'ndif_http_request_duration_seconds',
      help: 'Time to answer an HTTP call, by method, matched route and status code',
      labelNames: ['method', 'route', 'status_code'],
      buckets: SECONDS_BUCKETS,
      registers: [metrics.registry],
    });
  app.addHook('onResponse', async (req: FastifyRequest, reply: FastifyReply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    if (route === '/metrics') return;
    const s = reply.elapsedTime / 1000;
    seconds.observe(
      { method: KNOWN_METHODS.has(req.method) ? req.method : 'OTHER', route, status_code: String(reply.statusCode) },
      s,
    );
    if (route === '/requests' && req.method === 'POST' && reply.statusCode < 300) {
      const model = (req.body as { model?: unknown } | undefined)?.model;
      if (typeof model === 'string' && isModel(model)) metrics.requests.observe('submit', model, s);
    }
  });
  app.get('/metrics', { config: { access: 'public' } }, async (_req, reply) => {
    const own = await metrics.registry.metrics();
    const text = metrics.alsoExport === undefined ? own : mergeExposition(own, await metrics.alsoExport());
    return reply.header('content-type', metrics.registry.contentType).header('cache-control', 'no-store').send(text);
  });
}
