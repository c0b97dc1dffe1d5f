// The tensor routes on the real HTTP API (auth on, SQLite event store, files blob store, the test's clock): an upload
// is recorded as TensorUploaded on the key's own stream with its blob; bad dtype, shape, length or a body that ends
// early is refused with a code and records nothing; over the key's storage quota (results and tensors together) or
// the upload limit is refused; another key's tensor answers exactly as an unknown name, at submission too; a request
// naming a tensor carries its reference; delete and expiry remove it and its blob.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startApi, submitBody, type ApiHarness } from '../command-api/harness.js';
import { bearer } from '../support/http.js';

let h: ApiHarness;
let alice: string;
let bob: string;
let aliceId: string;

const QUOTA = 3000;
const MAX = 2048;
const RETENTION_MS = 60_000;

before(async () => {
  h = await startApi({
    auth: true,
    config: {
      rateLimit: null,
      tensorMaxBytes: MAX,
      tensorRetentionMs: RETENTION_MS,
      keyLimits: { maxQueued: 50, maxTimeoutMs: 120_000, storageQuotaBytes: QUOTA },
    },
  });
  alice = await h.newKey('alice');
  bob = await h.newKey('bob');
  aliceId = alice.split('_')[1]!;
});
after(() => h.close());

const f32 = (values: number[]) => Buffer.from(new Float32Array(values).buffer);

function put(key: string, name: string, body: Buffer, dtype = 'float32', shape = String(body.length / 4), extra = {}) {
  return h.app.inject({
    method: 'PUT',
    url: `/tensors/${name}`,
    payload: body,
    headers: {
      ...bearer(key),
      'content-type': 'application/octet-stream',
      'x-ndif-dtype': dtype,
      'x-ndif-shape': shape,
      ...extra,
    },
  });
}

const list = async (key: string) =>
  (await h.app.inject({ method: 'GET', url: '/tensors', headers: bearer(key) })).json() as {
    tensors: Array<{ name: string; bytes: number; sha256: string }>;
    bytes: number;
  };

describe('tensor uploads', () => {
  it("an upload is recorded on the key's stream with its blob; GET /tensors lists the key's own only", async () => {
    const bytes = f32([1.5, -2.25, 3, 4]);
    const r = await put(alice, 'probe_w', bytes, 'float32', '2,2');
    assert.equal(r.statusCode, 201, r.body);
    const sha = createHash('sha256').update(bytes).digest('hex');
    const { uploadedAt, expiresAt, ...rest } = r.json() as Record<string, unknown>;
    assert.deepEqual(rest, { name: 'probe_w', dtype: 'float32', shape: [2, 2], bytes: 16, sha256: sha });
    assert.equal(Date.parse(expiresAt as string) - Date.parse(uploadedAt as string), RETENTION_MS);
    const [ev] = await h.store.readStream(`tensors-key:${aliceId}`);
    assert.equal(ev?.type, 'TensorUploaded');
    const ref = (ev!.data as { blobRef: string }).blobRef;
    assert.ok((await h.blobs.get(ref)).bytes.equals(bytes), 'the blob holds exactly the bytes sent');
    assert.deepEqual(
      (await list(alice)).tensors.map((t) => t.name),
      ['probe_w'],
    );
    assert.deepEqual((await list(bob)).tensors, []);
  });

  it("bad headers, a length that is not the shape's, a body that ends early: coded refusals, nothing recorded", async () => {
    const head = await h.store.headPosition();
    const cases: Array<[Awaited<ReturnType<typeof put>>, string]> = [
      [await put(alice, 'x', f32([1, 2]), 'float64', '2'), 'API_TENSOR_INVALID'],
      [await put(alice, 'x', f32([1, 2]), 'float32', '2,a'), 'API_TENSOR_INVALID'],
      [await put(alice, 'x', f32([1, 2]), 'float32', '0'), 'API_TENSOR_INVALID'],
      [await put(alice, 'x', f32([1, 2]), 'float32', '3'), 'API_TENSOR_INVALID'],
      [await put(alice, '1bad-name', f32([1, 2]), 'float32', '2'), 'API_TENSOR_INVALID'],
      [await put(alice, 'x', f32([1, 2, 3]), 'float32', '4', { 'content-length': '16' }), 'API_TENSOR_INVALID'],
      [await put(alice, 'x', Buffer.alloc(MAX + 4), 'float32', String((MAX + 4) / 4)), 'API_TENSOR_TOO_LARGE'],
    ];
    for (const [r, code] of cases) assert.equal(r.json().code, code, r.body);
    assert.equal(cases[5]![0].statusCode, 400);
    assert.match(cases[5]![0].json().message, /ended after 12 of the declared 16 bytes/);
    assert.equal(cases[6]![0].statusCode, 413);
    assert.equal(await h.store.headPosition(), head, 'nothing recorded');
    assert.deepEqual(
      (await list(alice)).tensors.map((t) => t.name),
      ['probe_w'],
    );
  });

  it("over the key's storage quota is refused (429 API_STORAGE_QUOTA_EXCEEDED); replacing a tensor counts it once", async () => {
    const ok = await put(alice, 'a', Buffer.alloc(2000), 'float32', '500');
    assert.equal(ok.statusCode, 201, ok.body);
    const again = await put(alice, 'a', Buffer.alloc(2000), 'float32', '500');
    assert.equal(again.statusCode, 201, 'a replacement does not count the tensor it replaces');
    const head = await h.store.headPosition();
    const over = await put(alice, 'b', Buffer.alloc(2048), 'float32', '512');
    assert.equal(over.statusCode, 429, over.body);
    assert.equal(over.json().code, 'API_STORAGE_QUOTA_EXCEEDED');
    assert.equal(over.json().details.storedBytes, 2016);
    assert.equal(await h.store.headPosition(), head);
    assert.equal((await list(alice)).bytes, 2016);
    // bob's quota is his own
    assert.equal((await put(bob, 'b', Buffer.alloc(2048), 'float32', '512')).statusCode, 201);
  });

  it("another key's tensor answers exactly as an unknown name (delete and submit)", async () => {
    const theirs = await h.app.inject({ method: 'DELETE', url: '/tensors/probe_w', headers: bearer(bob) });
    const none = await h.app.inject({ method: 'DELETE', url: '/tensors/never_uploaded', headers: bearer(bob) });
    assert.equal(theirs.statusCode, 404);
    assert.equal(theirs.json().code, 'API_UNKNOWN_TENSOR');
    const strip = (b: { message: string; details: { name: string } }) => ({
      ...b,
      message: b.message.replace(b.details.name, 'N'),
      details: { ...b.details, name: 'N' },
    });
    assert.deepEqual(strip(theirs.json()), strip(none.json()));
    const sub = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'steal', tensors: ['probe_w'] }),
      headers: bearer(bob),
    });
    assert.equal(sub.statusCode, 404);
    assert.equal(sub.json().code, 'API_UNKNOWN_TENSOR');
  });

  it('a request naming a tensor carries its reference; delete, then it is refused', async () => {
    const sub = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'uses', tensors: ['probe_w'] }),
      headers: bearer(alice),
    });
    assert.equal(sub.statusCode, 202, sub.body);
    const [received] = await h.store.readStream(`request-${aliceId}:uses`, { limit: 1 });
    const refs = (received!.data as { payload: { tensors: Array<{ name: string; bytes: number; shape: number[] }> } })
      .payload.tensors;
    assert.deepEqual(
      refs.map((t) => [t.name, t.bytes, t.shape]),
      [['probe_w', 16, [2, 2]]],
    );
    const [up] = await h.store.readStream(`tensors-key:${aliceId}`, { limit: 1 });
    const ref = (up!.data as { blobRef: string }).blobRef;
    const del = await h.app.inject({ method: 'DELETE', url: '/tensors/probe_w', headers: bearer(alice) });
    assert.deepEqual(del.json(), { name: 'probe_w', deleted: true });
    assert.equal(await h.blobs.head(ref), undefined, 'the blob is deleted');
    const after = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'after', tensors: ['probe_w'] }),
      headers: bearer(alice),
    });
    assert.equal(after.json().code, 'API_UNKNOWN_TENSOR');
  });

  it('a tensor past its retention is gone: recorded as TensorDeleted EXPIRED, its blob deleted, its bytes freed', async () => {
    assert.equal((await put(alice, 'short', f32([1]), 'float32', '1')).statusCode, 201);
    const events = await h.store.readStream(`tensors-key:${aliceId}`);
    const ref = (events.at(-1)!.data as { blobRef: string }).blobRef;
    h.clock.now += RETENTION_MS + 1;
    assert.deepEqual((await list(alice)).tensors, []);
    const last = (await h.store.readStream(`tensors-key:${aliceId}`))
      .filter((e) => e.type === 'TensorDeleted')
      .map((e) => e.data as { name: string; reason: string });
    assert.ok(last.some((d) => d.name === 'short' && d.reason === 'EXPIRED'));
    assert.equal(await h.blobs.head(ref), undefined);
    const sub = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'expired', tensors: ['short'] }),
      headers: bearer(alice),
    });
    assert.equal(sub.json().code, 'API_UNKNOWN_TENSOR');
  });
});
