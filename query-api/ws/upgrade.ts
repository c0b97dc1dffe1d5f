// The status websocket's HTTP upgrade on /ws: the same admission as any call (protocol version, API key from the
// headers or ?key=), refused with the HTTP status and JSON body before the upgrade; then a StatusConnection.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { WebSocketServer } from 'ws';
import type { RouteDeps } from '../../http/deps.js';
import { toHttpFailure, type HttpFailure } from '../../http/error-handler.js';
import type { Identity } from '../../auth/keys.js';
import { isAuthFailure } from '../../http/auth-throttle.js';
import { identify, presentedKey } from '../../http/identify.js';
import { checkClientProtocol } from '../../http/protocol-check.js';
import { PROTOCOL_HEADER, API_PROTOCOL_VERSION } from '../../protocol/api-version.js';
import { ApiErrorCode } from '../../http/errors.js';
import { StatusConnection, type Corkable } from './connection.js';
import type { StatusHub } from './hub.js';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

function refuseUpgrade(socket: Duplex, f: HttpFailure): void {
  const body = JSON.stringify(f.body);
  const headers = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
    [PROTOCOL_HEADER]: API_PROTOCOL_VERSION,
    ...f.headers,
  };
  const head = [
    `HTTP/1.1 ${f.status} ${REASONS[f.status] ?? 'Error'}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ].join('\r\n');
  socket.end(`${head}\r\n\r\n${body}`);
}

export function attachStatusSocket(app: FastifyInstance, deps: RouteDeps, hub: StatusHub): void {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  const log = deps.ctx.log;

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', (e) => log.debug({ err: e }, 'status websocket upgrade: socket error'));
    void (async () => {
      try {
        const url = new URL(req.url ?? '/', 'http://localhost');
        if (url.pathname !== '/ws') {
          refuseUpgrade(socket, {
            status: 404,
            body: {
              code: ApiErrorCode.routeNotFound,
              message: `there is no websocket at ${url.pathname.slice(0, 200)}; the status websocket is /ws`,
            },
          });
          return;
        }
        checkClientProtocol(req.headers[PROTOCOL_HEADER] ?? url.searchParams.get('protocol') ?? undefined);
        const source = req.socket.remoteAddress ?? 'unknown';
        deps.authThrottle?.check(source);
        let identity: Identity | null;
        try {
          identity = await identify(
            deps.config.auth,
            deps.keys,
            presentedKey(req.headers, url.searchParams.get('key') ?? undefined),
            false,
          );
        } catch (e) {
          if (deps.authThrottle !== undefined && isAuthFailure(e))
            deps.authThrottle.failed(source, e, 'GET /ws (upgrade)');
          throw e;
        }
        wss.handleUpgrade(req, socket, head, (ws) => {
          new StatusConnection(ws, identity!, hub, deps, socket as Partial<Corkable>);
        });
      } catch (e) {
        refuseUpgrade(socket, toHttpFailure(e, log, deps.config.bodyLimitBytes, 'GET /ws (upgrade)'));
      }
    })();
  };

  app.server.on('upgrade', onUpgrade);
  app.addHook('preClose', async () => {
    app.server.off('upgrade', onUpgrade);
    hub.close();
    for (const ws of wss.clients) ws.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  });

  app.get('/ws', { config: { access: 'public' } }, async (_req, reply) =>
    reply.code(426).header('upgrade', 'websocket').send({
      code: ApiErrorCode.websocketRequired,
      message: '/ws is the status websocket; connect with a websocket client (Upgrade: websocket)',
      hint: 'docs/http-api.md, "Status websocket"',
    }),
  );
}
