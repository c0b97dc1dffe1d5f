// Bad-input fuzzing of every HTTP route (tests/fuzz/http-cases.ts), seeded: 3,000 calls through fastify's inject
// (10,500 with NDIF_FUZZ=long, tests/fuzz/runs.ts), then a sample over a real socket (the same cases through fetch, and
// raw malformed HTTP). For every call: the server answers (no crash, no hang); a non-2xx answer is `{ code, message }`;
// a 500 carries the id of a log line that names its cause; a refused command and every read leave the event log's head
// where it was.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import fc from 'fast-check';
import { startApiFabric, type ApiFabric } from './api-fabric.js';
import { httpCase, ROUTES, type HttpCase } from './http-cases.js';
import { fuzzRuns, share } from './runs.js';

const SEED = 20_251_204;
const LONG_INJECT_RUNS = 10_500;
const INJECT_RUNS = fuzzRuns(3_000, LONG_INJECT_RUNS);
const SOCKET_RUNS = 300;

let f: ApiFabric;
const stats = {
  byStatus: new Map<number, number>(),
  byRoute: new Map<string, number>(),
  codes500: new Map<string, number>(),
  accepted: 0,
};

before(async () => {
  f = await startApiFabric();
  // Something to find: two requests and a deployment.
  for (const requestId of ['seed-1', 'seed-2']) {
    const r = await f.app.inject({
      method: 'POST',
      url: '/requests',
      headers: { authorization: `Bearer ${f.keys.user}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ requestId, model: 'gpt2-tiny', invokes: [{ input: 'hello' }] }),
    });
    assert.equal(r.statusCode, 202, r.body);
  }
  const d = await f.app.inject({
    method: 'POST',
    url: '/deployments',
    headers: { authorization: `Bearer ${f.keys.operator}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ model: 'gpt2-tiny' }),
  });
  assert.equal(d.statusCode, 202, d.body);
});
after(async () => {
  await f?.close();
});

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

/** The properties every answer has, whatever was sent. */
function check(c: HttpCase, a: Answer, headBefore: number, headAfter: number): void {
  const what = `${c.method} ${c.url.slice(0, 200)} → ${a.status} ${a.text.slice(0, 300)}`;
  assert.ok(a.status >= 200 && a.status <= 599, what);
  stats.byStatus.set(a.status, (stats.byStatus.get(a.status) ?? 0) + 1);
  stats.byRoute.set(c.route, (stats.byRoute.get(c.route) ?? 0) + 1);
  const ok = a.status >= 200 && a.status < 300;
  if (!ok && c.method !== 'HEAD' && a.status !== 101) {
    assert.match(a.contentType, /application\/json/, what);
    const body = JSON.parse(a.text) as { code?: unknown; message?: unknown; details?: { errorId?: unknown } };
    assert.equal(typeof body.code, 'string', what);
    assert.equal(typeof body.message, 'string', what);
    if (a.status === 500) {
      stats.codes500.set(String(body.code), (stats.codes500.get(String(body.code)) ?? 0) + 1);
      const errorId = body.details?.errorId;
      assert.ok(
        typeof errorId === 'string' && f.errors.some((l) => l.errorId === errorId),
        `a 500 without a logged reason: ${what}`,
      );
    } else if (a.status > 500) {
      assert.ok(f.errors.length > 0, `a ${a.status} with nothing logged: ${what}`);
    }
  }
  if (ok && c.method === 'POST') stats.accepted++;
  if (!ok || c.method !== 'POST')
    assert.equal(headAfter, headBefore, `the log head moved on a ${ok ? 'read' : 'refused command'}: ${what}`);
}

describe('HTTP fuzz', () => {
  it(`${INJECT_RUNS} seeded calls through inject: answers, error shape, logged 500s, no state change when refused`, async (t) => {
    const started = Date.now();
    await fc.assert(
      fc.asyncProperty(httpCase(f.keys), async (c) => {
        const before = await f.head();
        const r = await f.app.inject({ method: c.method as 'GET', url: c.url, headers: c.headers, payload: c.body });
        check(
          c,
          { status: r.statusCode, contentType: String(r.headers['content-type'] ?? ''), text: r.body },
          before,
          await f.head(),
        );
      }),
      { seed: SEED, numRuns: INJECT_RUNS, endOnFailure: true },
    );
    const routesHit = new Set(stats.byRoute.keys());
    assert.equal(routesHit.size, ROUTES.length, 'every route was called');
    t.diagnostic(
      `${INJECT_RUNS} calls in ${Date.now() - started} ms; statuses ${JSON.stringify(Object.fromEntries([...stats.byStatus].sort((a, b) => a[0] - b[0])))}; accepted commands ${stats.accepted}; 500s ${JSON.stringify(Object.fromEntries(stats.codes500))}`,
    );
    assert.ok(
      (stats.byStatus.get(202) ?? 0) > share(50, LONG_INJECT_RUNS, INJECT_RUNS) &&
        (stats.byStatus.get(400) ?? 0) > share(1000, LONG_INJECT_RUNS, INJECT_RUNS),
      'the cases reach both acceptance and validation',
    );
  });

  it(`${SOCKET_RUNS} of the same cases over a real socket, then raw malformed HTTP; the server still answers`, async () => {
    const url = await f.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = new URL(url);
    await fc.assert(
      fc.asyncProperty(httpCase(f.keys), async (c) => {
        if (c.method === 'GET' && c.url.startsWith('/ws')) return; // the websocket has its own fuzz
        const before = await f.head();
        let r: Response;
        try {
          r = await fetch(`${url}${c.url.startsWith('/') ? c.url : `/${c.url}`}`, {
            method: c.method,
            headers: c.headers,
            body: c.body,
          });
        } catch (e) {
          // fetch refuses some of what the fuzz builds (a malformed URL or header) before sending: nothing to check.
          if (e instanceof TypeError) return;
          throw e;
        }
        check(
          c,
          {
            status: r.status,
            contentType: r.headers.get('content-type') ?? '',
            text: c.method === 'HEAD' ? '' : await r.text(),
          },
          before,
          await f.head(),
        );
      }),
      { seed: SEED + 1, numRuns: SOCKET_RUNS, endOnFailure: true },
    );
    const raw = [
      'GARBAGE\r\n\r\n',
      'GET / HTTP/9.9\r\n\r\n',
      'POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{"a"',
      'POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
      'POST /requests HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      `GET /${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      `GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`,
      'GET /ping HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
      'GET /ping HTTP/1.1\r\nHost: x\r\nX: \u0000\u0001\r\n\r\n',
      'GET /requests/%zz HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
      'GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: nope\r\n\r\n',
      '\u0016\u0003\u0001\u0000\u00a5\u0001\u0000\u0000\u00a1\u0003\u0003',
    ];
    const headBefore = await f.head();
    for (const payload of raw) {
      const answer = await new Promise<string>((resolve) => {
        const s = connect(Number(port), '127.0.0.1');
        let got = '';
        s.setEncoding('latin1');
        s.on('data', (d: string) => (got += d));
        s.on('error', () => resolve(got));
        s.on('close', () => resolve(got));
        s.write(Buffer.from(payload, 'latin1'));
        setTimeout(() => s.end(), 300);
        setTimeout(() => s.destroy(), 1500);
      });
      assert.ok(
        answer === '' || /^HTTP\/1\.1 [1-5]\d\d /.test(answer),
        `raw ${JSON.stringify(payload.slice(0, 60))} → ${JSON.stringify(answer.slice(0, 120))}`,
      );
      assert.ok(
        !/^HTTP\/1\.1 5/.test(answer) || /errorId/.test(answer),
        `raw ${JSON.stringify(payload.slice(0, 60))} → ${answer.slice(0, 200)}`,
      );
    }
    assert.equal(await f.head(), headBefore, 'malformed HTTP changed nothing');
    const ping = await fetch(`${url}/ping`);
    assert.equal(ping.status, 200, 'the server still answers');
  });
});
