// A result read while its agent writes it, over the real control plane: RESULT_WRITING announces it with a signed URL
// to a `results: "stream"` subscription only; the download sends the pieces written so far before the writer
// finished, and the rest as they come; COMPLETED then says `streamed: true` instead of carrying the result again. An
// attempt requeued while it writes cuts the download short; a request with nothing written has no result to read.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { get, type IncomingHttpHeaders } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { ReportingAgent, settle, startApi, submitAndStart, type ApiHarness } from '../command-api/harness.js';
import { TestSocket, type WsMessage } from './ws-client.js';
import { bearer } from '../support/http.js';

const MIB = 1024 * 1024;

interface Download {
  status: number;
  headers: IncomingHttpHeaders;
  /** Resolves once at least `n` bytes of the body came. */
  received(n: number): Promise<void>;
  done: Promise<{ body: Buffer; error: unknown }>;
}

/** A GET over a real socket whose body can be watched as it comes. */
function download(url: string, headers: Record<string, string> = {}): Promise<Download> {
  return new Promise((resolve, reject) => {
    get(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let waiters: Array<{ n: number; resolve: () => void }> = [];
      let error: unknown;
      const done = new Promise<{ body: Buffer; error: unknown }>((settled) => {
        res.on('data', (c: Buffer) => {
          chunks.push(c);
          size += c.byteLength;
          waiters = waiters.filter((w) => {
            if (size < w.n) return true;
            w.resolve();
            return false;
          });
        });
        res.on('error', (e) => (error = e));
        res.on('close', () =>
          settled({
            body: Buffer.concat(chunks),
            error: error ?? (res.complete ? undefined : new Error('the body ended before its end')),
          }),
        );
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        received: (n) => (size >= n ? Promise.resolve() : new Promise((r) => waiters.push({ n, resolve: r }))),
        done,
      });
    }).on('error', reject);
  });
}

let h: ApiHarness;
let agent: ReportingAgent;
let user: string;
let other: string;

before(async () => {
  h = await startApi({ auth: true, config: { rateLimit: null, resultUrlTtlMs: 60_000 } });
  await h.listen();
  user = await h.newKey('alice');
  other = await h.newKey('bob');
  agent = new ReportingAgent(h);
  await agent.register();
});
after(() => h.close());

/** Submits as alice and starts it; the recorded id and attempt. */
const running = (requestId: string) => submitAndStart(h, agent, user, requestId);

const statusOf = (ms: WsMessage[], status: string) => ms.find((m) => m.status === status);

describe('a result read while it is written', () => {
  it('RESULT_WRITING gives its URL; the download has the first pieces before the writer finished', async () => {
    const streamed = await TestSocket.open(h.url, bearer(user));
    const binary = await TestSocket.open(h.url, bearer(user));
    const d = await running('r-writing');
    streamed.send({ type: 'subscribe', requestId: 'r-writing', results: 'stream' });
    binary.send({ type: 'subscribe', requestId: 'r-writing', results: 'binary' });
    await streamed.untilStatus('r-writing', 'RUNNING');
    await binary.untilStatus('r-writing', 'RUNNING');

    const bytes = randomBytes(3 * MIB + 11);
    const w = await h.blobs.openWriter(bytes.byteLength);
    await agent.writing(d.requestId, d.attempt, w.ref, bytes.byteLength);
    await streamed.untilStatus('r-writing', 'RESULT_WRITING');
    const announced = statusOf(streamed.statuses('r-writing'), 'RESULT_WRITING')!;
    assert.equal(announced.bytes, bytes.byteLength);
    assert.equal(announced.attempt, d.attempt);
    assert.match(String(announced.url), /\/result\?token=/);

    // While it is written, GET /requests/:id shows it RUNNING with no result, and the write in its history.
    const v = (await h.app.inject({ method: 'GET', url: '/requests/r-writing', headers: bearer(user) })).json();
    assert.equal(v.status, 'RUNNING');
    assert.equal(v.result, null);
    assert.ok(v.statuses.some((s: { status: string }) => s.status === 'RESULT_WRITING'));

    // Another key does not see it; a token changed by one character is refused; neither starts a download.
    const foreign = await h.app.inject({ method: 'GET', url: '/requests/r-writing/result', headers: bearer(other) });
    assert.equal(foreign.statusCode, 404, foreign.body);
    assert.equal(foreign.json().code, 'API_REQUEST_NOT_FOUND');
    const url = announced.url as string;
    const forged = `${url.slice(0, -2)}${url.endsWith('AA') ? 'BB' : 'AA'}`;
    const refused = await h.app.inject({ method: 'GET', url: forged });
    assert.equal(refused.statusCode, 403, refused.body);
    assert.equal(refused.json().code, 'RESULT_TOKEN_INVALID');

    // The answer's head goes out with its first bytes.
    const answering = download(`${h.url}${announced.url as string}`);
    await w.write(bytes.subarray(0, MIB));
    await w.write(bytes.subarray(MIB, 2 * MIB));
    const got = await answering;
    assert.equal(got.status, 200, got.status === 200 ? '' : String((await got.done).body));
    assert.equal(got.headers['x-ndif-result-writing'], 'true');
    assert.equal(got.headers['content-length'], String(bytes.byteLength));
    // Not finished, not completed: the first MiB is already with the client.
    await got.received(MIB);
    assert.equal(h.view.state.requests.byId.get(d.requestId)!.status, 'RUNNING');
    await w.write(bytes.subarray(2 * MIB));
    const info = await w.finish();
    await agent.completeWith(d.requestId, d.attempt, info);
    const { body, error } = await got.done;
    assert.equal(error, undefined);
    assert.ok(body.equals(bytes));

    await streamed.untilStatus('r-writing', 'COMPLETED');
    const done = statusOf(streamed.statuses('r-writing'), 'COMPLETED')!;
    assert.equal(done.streamed, true);
    assert.equal(done.binary, undefined, 'no binary frame: the client has it');
    assert.equal(done.sha256, info.sha256);
    assert.equal(typeof done.url, 'string', 'the URL again, in case the early read failed');
    assert.equal(streamed.messages.filter((m) => m.type === 'binary').length, 0);

    // A `binary` subscription is not told of the write, and gets the result as its binary frame.
    await binary.untilStatus('r-writing', 'COMPLETED');
    assert.equal(statusOf(binary.statuses('r-writing'), 'RESULT_WRITING'), undefined);
    assert.equal(statusOf(binary.statuses('r-writing'), 'COMPLETED')!.binary, true);
    await binary.until((ms) => ms.some((m) => m.type === 'binary'), 'the binary frame');
    const frame = binary.messages.find((m) => m.type === 'binary')!.data as Buffer;
    assert.ok(frame.equals(bytes));

    // The same URL, once completed, reads the stored result.
    const later = await download(`${h.url}${announced.url as string}`);
    assert.equal(later.headers['x-ndif-result-writing'], undefined);
    assert.ok((await later.done).body.equals(bytes));
    await streamed.close();
    await binary.close();
  });

  it('an attempt requeued while it writes cuts the download short; its URL then has no result to give', async () => {
    const d = await running('r-requeued');
    const bytes = randomBytes(3 * MIB);
    const w = await h.blobs.openWriter(bytes.byteLength);
    await agent.writing(d.requestId, d.attempt, w.ref, bytes.byteLength);
    const ws = await TestSocket.open(h.url, bearer(user));
    ws.send({ type: 'subscribe', requestId: 'r-requeued', results: 'stream' });
    // Subscribed after the write began: the replay announces it.
    await ws.untilStatus('r-requeued', 'RESULT_WRITING');
    const url = `${h.url}${statusOf(ws.statuses('r-requeued'), 'RESULT_WRITING')!.url as string}`;
    const answering = download(url);
    await w.write(bytes.subarray(0, 2 * MIB));
    const got = await answering;
    await got.received(MIB);
    await agent.restart(); // the agent's new boot requeues the attempt it ran
    await settle(h, [agent]);
    const { body, error } = await got.done;
    assert.notEqual(error, undefined, 'the client sees the download end early');
    assert.ok(body.byteLength < bytes.byteLength, `${body.byteLength} of ${bytes.byteLength} bytes came`);
    const again = await h.app.inject({ method: 'GET', url: url.slice(h.url.length) });
    assert.equal(again.statusCode, 409, again.body);
    assert.equal(again.json().code, 'RESULT_NOT_READY');
    await w.abort();
    const d2 = (await agent.dispatched()).find((x) => x.requestId === d.requestId)!;
    assert.equal(d2.attempt, d.attempt + 1);
    await agent.started(d2.requestId, d2.attempt);
    await agent.complete(d2.requestId, d2.attempt);
    await ws.untilStatus('r-requeued', 'COMPLETED');
    assert.equal(statusOf(ws.statuses('r-requeued'), 'COMPLETED')!.streamed, undefined, 'attempt 2 wrote no stream');
    await ws.close();
  });

  it('a running request that writes nothing has no result to download; one whose writer gave up is 410', async () => {
    const d = await running('r-nothing');
    const r = await h.app.inject({ method: 'GET', url: '/requests/r-nothing/result', headers: bearer(user) });
    assert.equal(r.statusCode, 409, r.body);
    assert.equal(r.json().code, 'RESULT_NOT_READY');
    const w = await h.blobs.openWriter(2 * MIB);
    await agent.writing(d.requestId, d.attempt, w.ref, 2 * MIB);
    await h.view.catchUp();
    await w.abort();
    const gone = await h.app.inject({ method: 'GET', url: '/requests/r-nothing/result', headers: bearer(user) });
    assert.equal(gone.statusCode, 410, gone.body);
    assert.equal(gone.json().code, 'BLOB_WRITE_ABORTED');
  });
});
