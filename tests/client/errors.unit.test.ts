import { createServer as createHttpServer } from 'node:http';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { UsageError } from '../../client/cli/command.js';
import { ExitCode } from '../../client/cli/exit-codes.js';
import { exitCodeOf, NotReadyError, renderError } from '../../client/cli/failures.js';
import { resolveClientConfig, maskKey } from '../../client/sdk/config.js';
import {
  CancelledError,
  describeNetworkCause,
  FabricHttpError,
  ProtocolMismatchError,
  RemoteError,
  UnreachableError,
} from '../../client/sdk/errors.js';
import { errorBodyOf, FabricHttp, httpFailure, normalizeUrl } from '../../client/sdk/http.js';

const bytes = (s: string) => new TextEncoder().encode(s);

test("the fabric's error body is kept; anything else becomes one that says what came back", () => {
  assert.deepEqual(
    errorBodyOf(404, bytes('{"code":"API_UNKNOWN_MODEL","message":"no model x","details":{"known":["a"]}}')),
    { code: 'API_UNKNOWN_MODEL', message: 'no model x', details: { known: ['a'] } },
  );
  const html = errorBodyOf(502, bytes('<html>Bad Gateway</html>'));
  assert.equal(html.code, 'HTTP_502');
  assert.match(html.message, /HTTP 502: <html>Bad Gateway/);
  assert.match(html.hint!, /the fabric's API/);
  assert.deepEqual(errorBodyOf(500, bytes('{"message":"boom"}')), { code: 'HTTP_500', message: 'boom' });
});

test('a protocol refusal becomes ProtocolMismatchError naming both versions', () => {
  const e = httpFailure(
    'http://h:1',
    400,
    {
      code: 'API_PROTOCOL_MISMATCH',
      message: 'client 2.0, server 1.0',
      details: { server: '1.0', client: '2.0', rule: 'same protocol major' },
    },
    'POST /requests',
  );
  assert.ok(e instanceof ProtocolMismatchError);
  assert.equal(e.serverVersion, '1.0');
  assert.equal(e.clientVersion, '2.0');
  assert.match(e.message, /speaks protocol 1\.0, this client speaks protocol 2\.0/);
  assert.ok(httpFailure('u', 403, { code: 'AUTH_KEY_UNKNOWN', message: 'm' }, 'GET /x') instanceof FabricHttpError);
});

test('RemoteError shows the block frames from the fabric first', () => {
  const e = new RemoteError('r1', {
    phase: 'execute',
    type: 'BlockError',
    message: 'TypeError: x is not a function',
    stack: 'TypeError: x is not a function\n    at block-0.js:3:7',
  });
  assert.equal(e.phase, 'execute');
  assert.equal(e.type, 'BlockError');
  assert.match(e.message, /request r1 failed \(execute, BlockError\): TypeError/);
  assert.match(e.stack!, /--- on the fabric ---\nTypeError: x is not a function\n {4}at block-0\.js:3:7\n--- here ---/);
});

test('exit codes per failure', () => {
  assert.equal(exitCodeOf(new UsageError('x')), ExitCode.usage);
  assert.equal(exitCodeOf(new UnreachableError('http://h', 'GET /', new Error('x'))), ExitCode.unreachable);
  assert.equal(exitCodeOf(new ProtocolMismatchError('u', '1.0', '2.0')), ExitCode.protocolMismatch);
  assert.equal(exitCodeOf(new NotReadyError('refused', {})), ExitCode.notReady);
  assert.equal(
    exitCodeOf(new FabricHttpError(404, { code: 'CP_DEPLOYMENT_NOT_FOUND', message: 'm' }, 'POST /x')),
    ExitCode.failed,
  );
  assert.equal(exitCodeOf(new CancelledError('r', 'user')), ExitCode.failed);
  assert.equal(exitCodeOf(new Error('x')), ExitCode.failed);
  const aborted = new DOMException('This operation was aborted', 'AbortError');
  assert.equal(exitCodeOf(aborted), ExitCode.interrupted, 'Ctrl-C during a wait');
  assert.equal(renderError(aborted, 'deploy'), 'ndif deploy: interrupted\n');
});

test('rendered errors give code, message, hint and details; auth failures say where the key came from', () => {
  const text = renderError(
    new FabricHttpError(
      403,
      {
        code: 'AUTH_KEY_UNKNOWN',
        message: 'no such key',
        hint: 'create one with POST /keys',
        details: { keyId: 'abc' },
      },
      'GET /cluster',
    ),
    'status',
  );
  assert.equal(
    text,
    'ndif status: AUTH_KEY_UNKNOWN: no such key\n  hint: create one with POST /keys\n  details: {"keyId":"abc"}\n  (the API key comes from --api-key or $NDIF_API_KEY; `ndif env` shows which one is used)\n',
  );
  assert.equal(renderError(new UsageError('missing <model>'), 'deploy'), 'ndif deploy: missing <model>\n');
});

test('an unreachable fabric: real refused connection, message says how to start one', async () => {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  const http = new FabricHttp({ url: `http://127.0.0.1:${port}` });
  await assert.rejects(http.json('GET', '/version'), (e: unknown) => {
    assert.ok(e instanceof UnreachableError);
    assert.equal(e.url, `http://127.0.0.1:${port}`);
    assert.match(
      e.message,
      new RegExp(`cannot reach the fabric at http://127\\.0\\.0\\.1:${port} \\(GET /version: connection refused\\)`),
    );
    assert.match(e.message, /npm start/);
    return true;
  });
  assert.equal(describeNetworkCause(Object.assign(new Error('x'), { cause: { code: 'ENOTFOUND' } })), 'ENOTFOUND');
});

test('a reply cut off mid-body is unreachable while reading the reply; a timeout is unreachable; a caller abort is its reason', async () => {
  const srv = createHttpServer((req, res) => {
    if (req.url === '/slow') return; // never answers
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
    res.write('{"partial":');
    setTimeout(() => res.socket?.destroy(), 20);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  try {
    const http = new FabricHttp({ url, timeoutMs: 300 });
    await assert.rejects(http.json('GET', '/cut'), (e: unknown) => {
      assert.ok(e instanceof UnreachableError, String(e));
      assert.match(e.message, /GET \/cut \(reading the reply\)/);
      return true;
    });
    await assert.rejects(http.json('GET', '/slow'), (e: unknown) => {
      assert.ok(e instanceof UnreachableError, String(e));
      assert.doesNotMatch(e.message, /reading the reply/);
      return true;
    });
    const caller = new AbortController();
    const reason = new Error('the caller gave up');
    setTimeout(() => caller.abort(reason), 20);
    await assert.rejects(http.json('GET', '/slow', { signal: caller.signal }), (e: unknown) => e === reason);
  } finally {
    srv.closeAllConnections();
    await new Promise<void>((r) => srv.close(() => r()));
  }
});

test('URL and key: option, else environment, else default; keys are masked', () => {
  assert.deepEqual(resolveClientConfig({}, {}), {
    url: 'http://127.0.0.1:8080',
    urlSource: 'default',
    apiKey: null,
    apiKeySource: 'none',
  });
  assert.deepEqual(resolveClientConfig({}, { NDIF_URL: 'http://a:1', NDIF_API_KEY: 'k1' }), {
    url: 'http://a:1',
    urlSource: 'env NDIF_URL',
    apiKey: 'k1',
    apiKeySource: 'env NDIF_API_KEY',
  });
  assert.deepEqual(
    resolveClientConfig({ url: 'http://b:2', apiKey: 'k2' }, { NDIF_URL: 'http://a:1', NDIF_API_KEY: 'k1' }),
    { url: 'http://b:2', urlSource: 'option', apiKey: 'k2', apiKeySource: 'option' },
  );
  assert.equal(maskKey('ndif_0123456789abcdef_secretsecret'), 'ndif…cret');
  assert.equal(maskKey(null), null);
  assert.equal(normalizeUrl('http://h:1/'), 'http://h:1');
  assert.throws(() => normalizeUrl('h:1x'), /must start with http/);
  assert.throws(() => normalizeUrl('not a url'), /is not a URL/);
  assert.equal(new FabricHttp({ url: 'http://h:1' }).resolve('/ws', { key: 'k' }, true), 'ws://h:1/ws?key=k');
  assert.equal(
    new FabricHttp({ url: 'https://h/api/' }).resolve('/requests/r%231/result?token=1.x'),
    'https://h/api/requests/r%231/result?token=1.x',
  );
});
