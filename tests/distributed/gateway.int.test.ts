// The gateway (fabric/gateway/) over real sockets: calls that change something and GET /keys reach the command
// API, other reads and the status websocket the query API; bodies, status codes and headers pass through; a
// refused upgrade comes back as the upstream's answer; an unreachable upstream is 502 GATEWAY_UPSTREAM_UNAVAILABLE.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type ClientRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, before, after } from 'node:test';
import { WebSocket, WebSocketServer } from 'ws';
import { createGateway } from '../../fabric/gateway/proxy.js';
import { upstreamOf } from '../../fabric/gateway/route.js';

function listen(server: Server): Promise<URL> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`))),
  );
}

/** An upstream that answers every call with what it received, as JSON. */
function echo(name: string): Server {
  return createServer(async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    res.writeHead(req.url === '/missing' ? 404 : 200, { 'content-type': 'application/json', 'x-upstream': name });
    res.end(
      JSON.stringify({
        upstream: name,
        method: req.method,
        url: req.url,
        body: Buffer.concat(chunks).toString(),
        forwardedFor: req.headers['x-forwarded-for'] ?? null,
        apiKey: req.headers['x-api-key'] ?? null,
      }),
    );
  });
}

/** The HTTP status a refused websocket handshake was answered with. */
async function refusedStatus(ws: WebSocket): Promise<number | undefined> {
  ws.on('error', () => undefined);
  const [req, res] = (await once(ws, 'unexpected-response')) as [ClientRequest, IncomingMessage];
  req.destroy();
  return res.statusCode;
}

describe('gateway', () => {
  let command: Server;
  let query: Server;
  let gateway: Server;
  let url: URL;
  const sockets = new WebSocketServer({ noServer: true });

  before(async () => {
    command = echo('command');
    query = echo('query');
    query.on('upgrade', (req, socket, head) => {
      if (req.headers['x-api-key'] === 'bad') {
        socket.end(
          'HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 21\r\n\r\n{"code":"AUTH_WRONG"}',
        );
        return;
      }
      sockets.handleUpgrade(req, socket, head, (ws) => ws.on('message', (d) => ws.send(`echo:${d.toString()}`)));
    });
    const [c, q] = await Promise.all([listen(command), listen(query)]);
    gateway = createGateway({ command: c, query: q });
    url = await listen(gateway);
  });

  after(async () => {
    gateway.closeAllConnections();
    for (const s of [gateway, command, query]) await new Promise((r) => s.close(r));
    sockets.close();
  });

  it('routes by method and path', () => {
    assert.equal(upstreamOf('POST', '/requests', false), 'command');
    assert.equal(upstreamOf('POST', '/deployments/scale', false), 'command');
    assert.equal(upstreamOf('GET', '/keys', false), 'command');
    assert.equal(upstreamOf('GET', '/keys/k1?x=1', false), 'command');
    assert.equal(upstreamOf('GET', '/keysmith', false), 'query');
    assert.equal(upstreamOf('GET', '/requests/r1', false), 'query');
    assert.equal(upstreamOf('HEAD', '/cluster', false), 'query');
    assert.equal(upstreamOf('GET', '/ws', true), 'query');
  });

  it('passes calls, bodies, statuses and headers through to the right API', async () => {
    const post = await fetch(new URL('/requests', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'k' },
      body: JSON.stringify({ model: 'gpt2-tiny' }),
    });
    assert.equal(post.status, 200);
    assert.equal(post.headers.get('x-upstream'), 'command');
    const p = (await post.json()) as Record<string, unknown>;
    assert.deepEqual(
      [p.upstream, p.method, p.url, p.body, p.apiKey],
      ['command', 'POST', '/requests', '{"model":"gpt2-tiny"}', 'k'],
    );
    assert.equal(p.forwardedFor, '127.0.0.1');
    const get = (await (await fetch(new URL('/requests/r1?x=1', url))).json()) as Record<string, unknown>;
    assert.deepEqual([get.upstream, get.url], ['query', '/requests/r1?x=1']);
    assert.equal(((await (await fetch(new URL('/keys', url))).json()) as Record<string, unknown>).upstream, 'command');
    const missing = await fetch(new URL('/missing', url));
    assert.equal(missing.status, 404);
    // A body streamed without a length (chunked) arrives whole.
    const big = 'x'.repeat(300_000);
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(big.slice(0, 100_000)));
        c.enqueue(new TextEncoder().encode(big.slice(100_000)));
        c.close();
      },
    });
    const chunked = (await (
      await fetch(new URL('/requests', url), { method: 'POST', body: stream, duplex: 'half' } as RequestInit)
    ).json()) as Record<string, unknown>;
    assert.equal((chunked.body as string).length, big.length);
  });

  it('joins a websocket to the query API, and returns a refused upgrade as it was answered', async () => {
    const ws = new WebSocket(new URL('/ws', url.href.replace('http', 'ws')));
    await once(ws, 'open');
    ws.send('ping');
    const [msg] = (await once(ws, 'message')) as [Buffer];
    assert.equal(msg.toString(), 'echo:ping');
    ws.close();
    assert.equal(
      await refusedStatus(
        new WebSocket(new URL('/ws', url.href.replace('http', 'ws')), { headers: { 'x-api-key': 'bad' } }),
      ),
      401,
    );
  });

  it('answers 502 GATEWAY_UPSTREAM_UNAVAILABLE when an API process is down', async () => {
    const dead = createServer();
    const deadUrl = await listen(dead);
    await new Promise((r) => dead.close(r));
    const g = createGateway({ command: deadUrl, query: deadUrl });
    const gUrl = await listen(g);
    try {
      const r = await fetch(new URL('/deployments', gUrl), { method: 'POST', body: '{}' });
      assert.equal(r.status, 502);
      const body = (await r.json()) as { code: string; message: string; hint: string };
      assert.equal(body.code, 'GATEWAY_UPSTREAM_UNAVAILABLE');
      assert.match(body.message, /the command API at http:\/\/127\.0\.0\.1:\d+ did not answer/);
      assert.match(body.hint, /NDIF_COMMAND_API_URL/);
      assert.equal(await refusedStatus(new WebSocket(new URL('/ws', gUrl.href.replace('http', 'ws')))), 502);
    } finally {
      g.closeAllConnections();
      await new Promise((r) => g.close(r));
    }
  });
});
