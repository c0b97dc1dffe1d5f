// GET /: the status web page; GET /assets/uplot.js and /assets/uplot.css: the charting library it draws its plots
// with (uPlot, from the package as installed).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { RouteDeps } from '../../http/deps.js';
import { STATUS_PAGE_HTML } from '../page/html.js';

const uplotDir = join(dirname(createRequire(import.meta.url).resolve('uplot')), '..', 'dist');
let assets: { js: string; css: string } | undefined;
const uplot = () =>
  (assets ??= {
    js: readFileSync(join(uplotDir, 'uPlot.iife.min.js'), 'utf8'),
    css: readFileSync(join(uplotDir, 'uPlot.min.css'), 'utf8'),
  });

export function pageRoutes(app: FastifyInstance, deps: RouteDeps): void {
  deps.capabilities.add('status-page');
  app.get('/', { config: { access: 'public' } }, async (_req, reply) =>
    reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header(
        'content-security-policy',
        "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; connect-src 'self' ws: wss:",
      )
      .send(STATUS_PAGE_HTML),
  );
  app.get('/assets/uplot.js', { config: { access: 'public' } }, async (_req, reply) =>
    reply
      .header('content-type', 'text/javascript; charset=utf-8')
      .header('cache-control', 'max-age=3600')
      .send(uplot().js),
  );
  app.get('/assets/uplot.css', { config: { access: 'public' } }, async (_req, reply) =>
    reply.header('content-type', 'text/css; charset=utf-8').header('cache-control', 'max-age=3600').send(uplot().css),
  );
}
