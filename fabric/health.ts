// `GET /health` for the processes without an HTTP API (scheduler-relay, gpu-agent), on NDIF_HEALTH_PORT: 200 with
// the process's status as JSON while it is healthy, 503 otherwise. docker-compose's health checks call it. With
// metrics on, `GET /metrics` on the same port (Prometheus text format).
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export async function startHealthServer(
  port: number,
  host: string,
  status: () => { ok: boolean } & Record<string, unknown>,
  metrics?: Registry,
): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics' && metrics !== undefined) {
      metrics.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' }).end(text),
        (e: unknown) =>
          res
            .writeHead(500, { 'content-type': 'application/json' })
            .end(JSON.stringify({ code: 'METRICS_FAILED', message: (e as Error).message })),
      );
      return;
    }
    if (req.method !== 'GET' || (req.url !== '/health' && req.url !== '/ready')) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ code: 'NOT_FOUND', message: metrics ? 'GET /health or GET /metrics' : 'GET /health' }));
      return;
    }
    let body: { ok: boolean } & Record<string, unknown>;
    try {
      body = status();
    } catch (e) {
      body = { ok: false, error: (e as Error).message };
    }
    res.writeHead(body.ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

/** The URL a health server answers on (its bound port, for NDIF_HEALTH_PORT=0). */
export function healthUrl(server: Server, host: string): string {
  const a = server.address();
  const port = typeof a === 'object' && a !== null ? a.port : 0;
  return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}/health`;
}

/** NDIF_HEALTH_PORT as a port number, or undefined when unset. */
export function healthPortFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.NDIF_HEALTH_PORT;
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new Error(`NDIF_HEALTH_PORT=${JSON.stringify(raw)} is not a port (0-65535)`);
  return n;
}

/** The exit code of a process that refuses its configuration (sysexits EX_CONFIG): not restarted by a supervisor. */
export const CONFIG_FAULT_EXIT = 78;

/** A configuration the process cannot run with (a port in use, …): reported once with its code, not retried. */
export class ConfigFault extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
