// Results over the real control plane: inline below the threshold, a signed URL above it; the download answers
// the result container's bytes for a valid token (no key needed) and refuses expired, forged or foreign tokens;
// GET /requests/:id shows status, history, logs, error and result.
import assert from 'node:assert/strict';
import { get, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeResultContainer } from '../../protocol/result-container.js';
import { signResultToken } from '../../query-api/results/token.js';
import { ReportingAgent, startApi, submitAndStart, submitBody, type ApiHarness } from '../command-api/harness.js';
import { TestSocket } from './ws-client.js';
import { bearer } from '../support/http.js';
import { STREAMED_DOWNLOAD_MIN_BYTES } from '../../query-api/routes/requests.js';
import { tamperStoredBlob } from '../blobstore/tamper.js';

/** A GET over a real socket: the status, headers, the bytes that came and how the body ended. */
function download(
  url: string,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer; error: unknown }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      const chunks: Buffer[] = [];
      let error: unknown;
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e) => (error = e));
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          error: error ?? (res.complete ? undefined : new Error('the body ended before its end')),
        }),
      );
    }).on('error', reject);
  });
}

let h: ApiHarness;
let agent: ReportingAgent;
let user: string;
let other: string;
const SECRET = 'a-test-secret-of-enough-bytes';

before(async () => {
  h = await startApi({
    auth: true,
    config: { rateLimit: null, inlineResultMaxBytes: 1024, resultUrlTtlMs: 60_000, resultSecret: SECRET },
  });
  await h.listen();
  user = await h.newKey('alice');
  other = await h.newKey('bob');
  agent = new ReportingAgent(h);
  await agent.register();
});
after(() => h.close());

/** Submits as alice, runs it to COMPLETED with a result of `elements` float32 values; returns the bytes. */
async function complete(requestId: string, elements: number): Promise<Uint8Array> {
  const d = await submitAndStart(h, agent, user, requestId);
  await agent.log(d.requestId, d.attempt, 'hello from the block');
  const bytes = await agent.complete(d.requestId, d.attempt, elements);
  await h.view.catchUp();
  return bytes;
}

describe('results', () => {
  let small: Uint8Array;
  let large: Uint8Array;

  before(async () => {
    small = await complete('r-small', 8);
    large = await complete('r-large', 1000);
    assert.ok(small.byteLength <= 1024 && large.byteLength > 1024);
  });

  it('a small result is inline in GET /requests/:id, with the status history and logs', async () => {
    const r = await h.app.inject({ method: 'GET', url: '/requests/r-small', headers: bearer(user) });
    assert.equal(r.statusCode, 200, r.body);
    const v = r.json();
    assert.equal(v.status, 'COMPLETED');
    assert.equal(v.attempt, 1);
    assert.deepEqual(
      v.statuses.map((s: { status: string }) => s.status),
      ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING', 'COMPLETED'],
    );
    assert.deepEqual(v.logs, [{ attempt: 1, stream: 'stdout', line: 'hello from the block' }]);
    assert.equal(v.result.bytes, small.byteLength);
    assert.deepEqual(Buffer.from(v.result.inline, 'base64'), Buffer.from(small));
    assert.equal(v.result.url, undefined);
    assert.equal(v.error, null);
  });

  it('a large result is a signed URL; the download needs no key and gives the container', async () => {
    const v = (await h.app.inject({ method: 'GET', url: '/requests/r-large', headers: bearer(user) })).json();
    assert.equal(v.result.inline, undefined);
    // A signed URL names the recorded id (alice's scope): it is used without a key.
    assert.match(v.result.url, /^\/requests\/[0-9a-f]{16}%3Ar-large\/result\?token=\d+\.[A-Za-z0-9_-]{43}$/);
    assert.equal(v.result.expiresAt, new Date(h.clock.now + 60_000).toISOString());
    const r = await h.app.inject({ method: 'GET', url: v.result.url });
    assert.equal(r.statusCode, 200, r.body);
    assert.equal(r.headers['content-type'], 'application/vnd.ndif.result');
    assert.equal(r.headers['x-ndif-sha256'], v.result.sha256);
    assert.deepEqual(r.rawPayload, Buffer.from(large));
    const decoded = decodeResultContainer(new Uint8Array(r.rawPayload));
    assert.deepEqual(decoded.invokes[0]!.tensors[0]!.shape, [1000]);
  });

  it('on the websocket too: inline below the threshold, URL above', async () => {
    const ws = await TestSocket.open(h.url, bearer(user));
    await ws.subscribe('r-small');
    await ws.subscribe('r-large');
    await ws.untilStatus('r-large', 'COMPLETED');
    await ws.untilStatus('r-small', 'COMPLETED');
    const s = ws.statuses('r-small').at(-1)!;
    const l = ws.statuses('r-large').at(-1)!;
    assert.equal(typeof s.inline, 'string');
    assert.equal(l.inline, undefined);
    const d = await fetch(`${h.url}${l.url as string}`);
    assert.equal(d.status, 200);
    assert.deepEqual(Buffer.from(await d.arrayBuffer()), Buffer.from(large));
    await ws.close();
  });

  it('a result above 1 MiB is sent as it is read from the store; one changed on disk is cut short', async () => {
    const huge = await complete('r-huge', 32 * 1024 * 1024); // 128 MiB of float32
    assert.ok(huge.byteLength > STREAMED_DOWNLOAD_MIN_BYTES);
    const v = (await h.app.inject({ method: 'GET', url: '/requests/r-huge', headers: bearer(user) })).json();
    // This process serves the download and receives it: read whole first, its resident memory grew by 314-319 MB
    // while it ran (the bytes read, then sent); sent as read, by 45-50 MB.
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 2);
    const got = await download(`${h.url}${v.result.url}`);
    clearInterval(sampler);
    const grewMb = (rssPeak - rssBefore) / 2 ** 20;
    assert.ok(grewMb < 96, `resident memory grew by ${grewMb.toFixed(1)} MB while a 128 MiB result was downloaded`);
    assert.equal(got.status, 200);
    assert.equal(got.headers['content-length'], String(huge.byteLength));
    assert.equal(got.headers['x-ndif-sha256'], v.result.sha256);
    assert.equal(got.error, undefined);
    assert.ok(got.body.equals(Buffer.from(huge)));
    // The blob's last bytes changed behind the store's back: the first pieces go out, then the download is cut
    // before its end (the store finds the sha256 wrong once it has read everything).
    const changed = tamperStoredBlob(
      join(h.dir, 'blobs'),
      (_ref, bytes) => bytes.equals(Buffer.from(huge)),
      (b) => Buffer.concat([b.subarray(0, b.byteLength - 1), Buffer.from([b[b.byteLength - 1]! ^ 0xff])]),
    );
    assert.notEqual(changed, undefined, 'the result blob is stored in a data file');
    const cut = await download(`${h.url}${v.result.url}`);
    assert.equal(cut.status, 200);
    assert.ok(cut.body.byteLength < huge.byteLength, `${cut.body.byteLength} of ${huge.byteLength} bytes came`);
    assert.notEqual(cut.error, undefined, 'the client sees the download end early');
  });

  it('an expired token is 403 RESULT_TOKEN_EXPIRED; a fresh GET gives a new URL', async () => {
    const { url } = (await h.app.inject({ method: 'GET', url: '/requests/r-large', headers: bearer(user) })).json()
      .result;
    h.clock.now += 60_000;
    const r = await h.app.inject({ method: 'GET', url });
    assert.equal(r.statusCode, 403);
    assert.equal(r.json().code, 'RESULT_TOKEN_EXPIRED');
    const fresh = (await h.app.inject({ method: 'GET', url: '/requests/r-large', headers: bearer(user) })).json().result
      .url;
    assert.equal((await h.app.inject({ method: 'GET', url: fresh })).statusCode, 200);
  });

  it("forged, malformed or another request's tokens are 403 RESULT_TOKEN_INVALID", async () => {
    const { url } = (await h.app.inject({ method: 'GET', url: '/requests/r-large', headers: bearer(user) })).json()
      .result;
    const token = new URL(url, 'http://x').searchParams.get('token')!;
    const [exp, sig] = token.split('.');
    const alice = user.split('_')[1]!;
    const large = `${alice}%3Ar-large`;
    const ref = h.view.state.requests.byId.get(`${alice}:r-large`)!.result!.ref;
    const cases = [
      `/requests/${large}/result?token=${exp}.${sig!.slice(0, -2)}AA`,
      `/requests/${large}/result?token=${Number(exp) + 3_600_000}.${sig}`,
      `/requests/${large}/result?token=${signResultToken(Buffer.from('another secret, other server'), `${alice}:r-large`, ref, Number(exp))}`,
      `/requests/${alice}%3Ar-small/result?token=${token}`,
      `/requests/${large}/result?token=nonsense`,
    ];
    for (const u of cases) {
      const r = await h.app.inject({ method: 'GET', url: u });
      assert.equal(r.statusCode, 403, u);
      assert.equal(r.json().code, 'RESULT_TOKEN_INVALID', u);
    }
  });

  it("without a token: the submitter's key downloads, another key is told there is no such request, no key is 401", async () => {
    assert.equal(
      (await h.app.inject({ method: 'GET', url: '/requests/r-large/result', headers: bearer(user) })).statusCode,
      200,
    );
    const foreign = await h.app.inject({ method: 'GET', url: '/requests/r-large/result', headers: bearer(other) });
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.json().code, 'API_REQUEST_NOT_FOUND');
    const none = await h.app.inject({ method: 'GET', url: '/requests/r-large/result' });
    assert.equal(none.statusCode, 401);
    assert.equal(none.json().code, 'AUTH_KEY_MISSING');
  });

  it('no result yet: 409 RESULT_NOT_READY with the status; unknown request: 404', async () => {
    await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'r-pending' }),
      headers: bearer(user),
    });
    const r = await h.app.inject({ method: 'GET', url: '/requests/r-pending/result', headers: bearer(user) });
    assert.equal(r.statusCode, 409);
    assert.equal(r.json().code, 'RESULT_NOT_READY');
    assert.equal(r.json().details.status, 'QUEUED');
    const gone = await h.app.inject({ method: 'GET', url: '/requests/r-nothing', headers: bearer(user) });
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json().code, 'API_REQUEST_NOT_FOUND');
  });

  it('a request just submitted is visible at once (the read waits for its projection)', async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'r-instant' }),
      headers: bearer(user),
    });
    assert.equal(r.statusCode, 202);
    const v = await h.app.inject({ method: 'GET', url: '/requests/r-instant', headers: bearer(user) });
    assert.equal(v.statusCode, 200, v.body);
    assert.ok(['QUEUED', 'PROVISIONING', 'DEPLOYING'].includes(v.json().status));
    assert.equal(typeof v.json().position, 'number');
  });

  it("GET /requests lists the caller's own requests, newest first", async () => {
    const mine = (await h.app.inject({ method: 'GET', url: '/requests?limit=3', headers: bearer(user) })).json()
      .requests;
    assert.deepEqual(
      mine.map((r: { requestId: string }) => r.requestId),
      ['r-instant', 'r-pending', 'r-huge'],
    );
    const theirs = (await h.app.inject({ method: 'GET', url: '/requests', headers: bearer(other) })).json().requests;
    assert.deepEqual(theirs, []);
    const bad = await h.app.inject({ method: 'GET', url: '/requests?limit=0', headers: bearer(user) });
    assert.equal(bad.json().code, 'API_INVALID_PARAMS');
  });
});
