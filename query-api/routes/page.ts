// GET /: the status web page.
import type { FastifyInstance } from 'fastify';
import type { RouteDeps } from '../../http/deps.js';
import { STATUS_PAGE_HTML } from '../page/html.js';

export function pageRoutes(app: FastifyInstance, deps: RouteDeps): void {
  deps.capabilities.add('status-page');
  app.get('/', { config: { access: 'public' } }, async (_req, reply) =>
    reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header(
        'content-security-policy',
        "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self' ws: wss:",
      )
      .send(STATUS_PAGE_HTML),
  );
}
