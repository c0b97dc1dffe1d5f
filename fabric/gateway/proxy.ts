// The gateway of distributed mode: one URL for the SDK and the CLI in front of the command API and query API
// processes (route.ts decides which). Requests and responses are streamed through unchanged except for hop-by-hop
// headers; a websocket upgrade is answered by the query API and the two sockets are then joined. An upstream that
// cannot be reached gives 502 GATEWAY_UPSTREAM_UNAVAILABLE.
import {
  Agent,
  createServer,
  request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { upstreamOf, type Upstream } from './route.js';

export interface GatewayOptions {
  command: URL;
  query: URL;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
]);

function forwardHeaders(h: IncomingHttpHeaders, remote: string | undefined): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (!HOP_BY_HOP.has(k)) out[k] = v;
  if (remote !== undefined)
    out['x-forwarded-for'] = h['x-forwarded-for'] ? `${String(h['x-forwarded-for'])}, ${remote}` : remote;
  return out;
}

function unavailable(which: Upstream, target: URL, err: Error): string {
  return JSON.stringify({
    code: 'GATEWAY_UPSTREAM_UNAVAILABLE',
    message: `the ${which} API at ${target.origin} did not answer: ${err.message}`,
    hint: `start the ${which}-api process, or point NDIF_${which.toUpperCase()}_API_URL at it`,
  });
}

/** The status line and headers of an upstream response, as raw HTTP/1.1 (for a socket no longer an HTTP response). */
function head(res: IncomingMessage): string {
  const lines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage}`];
  for (let i = 0; i < res.rawHeaders.length; i += 2) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

export function createGateway(options: GatewayOptions): Server {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const target = (u: Upstream) => (u === 'command' ? options.command : options.query);

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const which = upstreamOf(req.method ?? 'GET', req.url ?? '/', false);
    const to = target(which);
    const up = request(
      {
        host: to.hostname,
        port: to.port,
        method: req.method,
        path: req.url,
        headers: forwardHeaders(req.headers, req.socket.remoteAddress),
        agent,
      },
      (upRes) => {
        const headers: IncomingHttpHeaders = {};
        for (const [k, v] of Object.entries(upRes.headers)) if (!HOP_BY_HOP.has(k)) headers[k] = v;
        res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, headers);
        upRes.pipe(res);
      },
    );
    up.setNoDelay(true);
    up.on('error', (err) => {
      if (res.headersSent) res.destroy(err);
      else res.writeHead(502, { 'content-type': 'application/json' }).end(unavailable(which, to, err));
    });
    req.pipe(up);
  });

  server.on('upgrade', (req: IncomingMessage, socket: Socket, first: Buffer) => {
    const to = target('query');
    socket.setNoDelay(true);
    const headers = forwardHeaders(req.headers, socket.remoteAddress);
    headers.connection = 'Upgrade';
    headers.upgrade = req.headers.upgrade;
    const up = request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers });
    up.on('upgrade', (upRes, upSocket: Socket, upFirst: Buffer) => {
      upSocket.setNoDelay(true);
      socket.write(head(upRes));
      if (upFirst.length > 0) socket.write(upFirst);
      if (first.length > 0) upSocket.write(first);
      upSocket.pipe(socket).on('error', () => socket.destroy());
      socket.pipe(upSocket).on('error', () => upSocket.destroy());
      upSocket.on('close', () => socket.destroy());
      socket.on('close', () => upSocket.destroy());
    });
    // The query API refused the upgrade (e.g. 401): its answer goes back as it is.
    up.on('response', (upRes) => {
      socket.write(head(upRes));
      upRes.pipe(socket);
    });
    up.on('error', (err) => {
      const body = unavailable('query', to, err);
      socket.end(
        `HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
    socket.on('error', () => up.destroy());
    up.end();
  });

  server.on('close', () => agent.destroy());
  return server;
}
