// POST /requests over the real control plane: what a submission records, idempotent resubmission by request id,
// and every refusal (unknown model, malformed block, bad body, body limit, bad JSON) changing nothing in the log.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { requestStream } from '../../domain/shared/ids.js';
import { REQUEST_PAYLOAD_FORMAT } from '../../protocol/request-payload.js';
import { MODEL, startApi, submitBody, type ApiHarness } from './harness.js';

let h: ApiHarness;

before(async () => {
  h = await startApi({ config: { bodyLimitBytes: 64 * 1024, rateLimit: null } });
});
after(() => h.close());

const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url, payload: payload as object, headers });

/** Runs `f` and checks that the log did not grow. */
async function unchanged(f: () => Promise<void>): Promise<void> {
  const before = await h.store.headPosition();
  await f();
  assert.equal(await h.store.headPosition(), before, 'a refused call appended events');
}

describe('submit', () => {
  it('records RequestReceived with the payload the agent runs and answers 202', async () => {
    const r = await post(
      '/requests',
      submitBody({
        requestId: 'r-sub-1',
        invokes: [{ input: 'Hello' }, { input: [1, 2, 3], block: 'async (m) => 1' }],
        newTokens: 2,
        timeoutMs: 5000,
      }),
    );
    assert.equal(r.statusCode, 202, r.body);
    const body = r.json();
    assert.equal(body.requestId, 'r-sub-1');
    assert.equal(body.status, 'RECEIVED');
    assert.equal(body.existing, false);
    assert.equal(body.trusted, true);
    assert.equal(body.links.self, '/requests/r-sub-1');
    const [received, queued] = await h.store.readStream(requestStream('r-sub-1'));
    assert.equal(received!.type, 'RequestReceived');
    assert.equal(queued!.type, 'RequestQueued');
    assert.equal(body.logPosition, queued!.position);
    const d = received!.data as Record<string, any>;
    assert.equal(d.modelKey, MODEL);
    assert.equal(d.submitter, 'local');
    assert.deepEqual(d.payload, {
      format: REQUEST_PAYLOAD_FORMAT,
      invokes: [{ prompt: 'Hello' }, { tokens: [1, 2, 3], block: 'async (m) => 1' }],
      block: submitBody().block,
      newTokens: 2,
      timeoutMs: 5000,
      blocking: true,
    });
    assert.deepEqual(d.options, { timeoutMs: 5000, queueTimeoutMs: null, steps: 3, maxAttempts: 5 });
    assert.equal(received!.metadata.actor, 'local');
    assert.equal(received!.metadata.correlationId, 'r-sub-1');
  });

  it('makes up a request id when none is given', async () => {
    const r = await post('/requests', submitBody());
    assert.equal(r.statusCode, 202, r.body);
    assert.match(r.json().requestId, /^gen-\d+$/);
  });

  it('untrusted: true records an untrusted request', async () => {
    const r = await post('/requests', submitBody({ requestId: 'r-untrusted', untrusted: true }));
    assert.equal(r.json().trusted, false);
    const [received] = await h.store.readStream(requestStream('r-untrusted'));
    assert.equal((received!.data as { trusted: boolean }).trusted, false);
  });

  it('the same id with the same body is idempotent (200, existing), nothing appended', async () => {
    assert.equal((await post('/requests', submitBody({ requestId: 'r-idem' }))).statusCode, 202);
    await unchanged(async () => {
      const again = await post('/requests', submitBody({ requestId: 'r-idem' }));
      assert.equal(again.statusCode, 200, again.body);
      assert.equal(again.json().existing, true);
      assert.equal(again.json().status, 'PROVISIONING', 'waiting for its model, which no agent hosts yet');
    });
  });

  it('the same id with another body is 409 API_REQUEST_ID_REUSED naming what differs', async () => {
    await post('/requests', submitBody({ requestId: 'r-reuse' }));
    await unchanged(async () => {
      const r = await post(
        '/requests',
        submitBody({ requestId: 'r-reuse', invokes: [{ input: 'something else' }], newTokens: 1 }),
      );
      assert.equal(r.statusCode, 409);
      assert.equal(r.json().code, 'API_REQUEST_ID_REUSED');
      assert.deepEqual(r.json().details.differs, ['invokes', 'newTokens']);
    });
  });

  it('an unknown model is 404 API_UNKNOWN_MODEL listing the known ones', async () => {
    await unchanged(async () => {
      const r = await post('/requests', submitBody({ model: 'gpt5' }));
      assert.equal(r.statusCode, 404);
      const e = r.json();
      assert.equal(e.code, 'API_UNKNOWN_MODEL');
      assert.deepEqual(e.details.known, [MODEL]);
      assert.match(e.message, /gpt2-tiny/);
    });
  });

  it('a block with a syntax error is 400 BLOCK_SYNTAX_ERROR naming the line, and is never run', async () => {
    await unchanged(async () => {
      const block =
        'async (m) => {\n  const h = await m.transformer.h[0].output;\n  globalThis.ran = true; const x = ;\n}';
      const r = await post('/requests', submitBody({ block }));
      assert.equal(r.statusCode, 400);
      const e = r.json();
      assert.equal(e.code, 'BLOCK_SYNTAX_ERROR');
      assert.equal(e.details.line, 3);
      assert.equal(e.details.invoke, 'shared');
      assert.match(e.message, /line 3/);
      assert.equal((globalThis as { ran?: boolean }).ran, undefined);
    });
    const r = await post(
      '/requests',
      submitBody({ block: undefined, invokes: [{ input: 'a' }, { input: 'b', block: 'async (m) => { return ) }' }] }),
    );
    assert.equal(r.json().code, 'BLOCK_SYNTAX_ERROR');
    assert.equal(r.json().details.invoke, 1);
    assert.equal(r.json().details.line, 1);
  });

  it('source that is not a function expression is refused without evaluating it', async () => {
    await unchanged(async () => {
      const r = await post('/requests', submitBody({ block: 'globalThis.evaluated = 1' }));
      assert.equal(r.statusCode, 400);
      assert.equal(r.json().code, 'BLOCK_SYNTAX_ERROR');
      assert.match(r.json().message, /not a function expression/);
      assert.equal((globalThis as { evaluated?: number }).evaluated, undefined);
    });
    for (const ok of [
      'async (m, ctx) => 1',
      '(m) => m',
      'async m => m',
      'async function (m) { return 1 }',
      '/* c */ // d\n async (m) => 1',
    ]) {
      const r = await post('/requests', submitBody({ block: ok }));
      assert.equal(r.statusCode, 202, `${ok}: ${r.body}`);
    }
  });

  it('unknown fields, missing fields and wrong types are 400 API_INVALID_BODY naming the field', async () => {
    await unchanged(async () => {
      const cases: Array<[unknown, RegExp]> = [
        [{ ...submitBody(), extra: 1 }, /unknown field "extra"/],
        [{ invokes: [{ input: 'x' }] }, /^model/],
        [submitBody({ invokes: [] }), /^invokes/],
        [submitBody({ invokes: [{ input: [1, -2] }] }), /^invokes\.0\.input/],
        [submitBody({ newTokens: 1.5 }), /^newTokens/],
        [submitBody({ requestId: 'bad id with spaces' }), /^requestId/],
        [[1, 2], /body/],
      ];
      for (const [body, message] of cases) {
        const r = await post('/requests', body);
        assert.equal(r.statusCode, 400, r.body);
        assert.equal(r.json().code, 'API_INVALID_BODY');
        assert.match(r.json().message, message);
      }
    });
  });

  it('a body over the limit is 413 API_BODY_TOO_LARGE with the limit', async () => {
    await unchanged(async () => {
      const r = await post('/requests', submitBody({ invokes: [{ input: 'x'.repeat(70 * 1024) }] }));
      assert.equal(r.statusCode, 413);
      assert.equal(r.json().code, 'API_BODY_TOO_LARGE');
      assert.equal(r.json().details.limitBytes, 64 * 1024);
    });
  });

  it('bad JSON is 400 API_INVALID_JSON; another media type is 415', async () => {
    await unchanged(async () => {
      const bad = await h.app.inject({
        method: 'POST',
        url: '/requests',
        payload: '{"model": ',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().code, 'API_INVALID_JSON');
      const proto = await h.app.inject({
        method: 'POST',
        url: '/requests',
        payload: '{"__proto__": {"x": 1}}',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(proto.json().code, 'API_INVALID_JSON');
      const text = await h.app.inject({
        method: 'POST',
        url: '/requests',
        payload: 'model=gpt2',
        headers: { 'content-type': 'text/plain' },
      });
      assert.equal(text.statusCode, 415);
      assert.equal(text.json().code, 'API_UNSUPPORTED_MEDIA_TYPE');
    });
  });

  it('an unknown route is 404 API_ROUTE_NOT_FOUND', async () => {
    const r = await h.app.inject({ method: 'DELETE', url: '/nothing/here' });
    assert.equal(r.statusCode, 404);
    assert.equal(r.json().code, 'API_ROUTE_NOT_FOUND');
  });
});

describe('cancel', () => {
  it('cancels a queued request; cancelling again is a no-op; a finished one is 409', async () => {
    await post('/requests', submitBody({ requestId: 'r-cancel' }));
    const r = await post('/requests/r-cancel/cancel', undefined);
    assert.equal(r.statusCode, 200, r.body);
    assert.deepEqual(r.json(), { requestId: 'r-cancel', cancelled: true, alreadyCancelled: false });
    const again = await h.app.inject({
      method: 'POST',
      url: '/requests/r-cancel/cancel',
      payload: '',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(again.json().alreadyCancelled, true);
    const events = await h.store.readStream(requestStream('r-cancel'));
    assert.equal(events.at(-1)!.type, 'RequestCancelled');
    assert.equal(events.at(-1)!.metadata.correlationId, 'r-cancel');
  });

  it('an unknown request is 404 CP_REQUEST_NOT_FOUND', async () => {
    const r = await post('/requests/nope/cancel', {});
    assert.equal(r.statusCode, 404);
    assert.equal(r.json().code, 'CP_REQUEST_NOT_FOUND');
  });
});
