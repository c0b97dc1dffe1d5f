// Sessions through the whole fabric in this process (HTTP body `traces`, the agent's runSession, TRACE statuses,
// one result container): env.ndif.session returns each trace's value, values carried between traces in ctx.shared;
// each trace's statuses reach onTrace live and GET /requests/:id afterwards; a failing trace names itself; bodies
// that mix a session with a single trace's fields are refused before anything is recorded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FabricHttpError, RemoteError, RequestShapeError } from '../../client/sdk/index.js';
import type { Tensor, TraceProgress } from '../../client/sdk/index.js';
import { withFabricClient } from './fabric-harness.js';

const env = withFabricClient();

test('a session: per trace what trace() gives, ctx.shared across traces, TRACE statuses live and in the history', async () => {
  const seen: TraceProgress[] = [];
  const r = await env.ndif.executeSession(
    'gpt2-tiny',
    [
      {
        input: 'The Eiffel Tower is in',
        block: async (m: any, ctx: any) => {
          ctx.shared.h = await m.transformer.h[0].output;
          return ctx.shared.h.shape;
        },
      },
      {
        input: ['Hello world, how are', 'Good morning to you'],
        block: async (m: any, ctx: any, p: { scale: number }) => {
          const h = await m.transformer.h[0].output;
          return {
            same: h.shape[1] === ctx.shared.h.shape[1],
            before: ctx.traces[0][0],
            scale: p.scale,
            trace: ctx.trace,
          };
        },
        params: { scale: 2 },
      },
      { input: [1, 2, 3], maxNewTokens: 2 },
    ],
    { onTrace: (t) => seen.push(t) },
  );
  assert.deepEqual(r.traces[0], [1, 7, 64]);
  assert.equal((r.traces[1] as unknown[]).length, 2);
  assert.deepEqual((r.traces[1] as Array<Record<string, unknown>>)[0], {
    same: false,
    before: [1, 7, 64],
    scale: 2,
    trace: 1,
  });
  assert.equal(r.traces[2], null);
  const metaTraces = r.meta.traces as Array<{ invokes: number; steps: number; generated: number[][] }>;
  assert.deepEqual(
    metaTraces.map((t) => [t.invokes, t.steps]),
    [
      [1, 1],
      [2, 1],
      [1, 2],
    ],
  );
  assert.equal(metaTraces[2]!.generated[0]!.length, 2);
  assert.deepEqual(
    seen.map((t) => `${t.trace}/${t.traces} ${t.status}`),
    ['0/3 RUNNING', '0/3 COMPLETED', '1/3 RUNNING', '1/3 COMPLETED', '2/3 RUNNING', '2/3 COMPLETED'],
  );
  assert.ok(seen.filter((t) => t.status === 'COMPLETED').every((t) => typeof t.ms === 'number' && t.ms! >= 0));
  const reply = await (await env.ndif.request(r.requestId).status()).reply;
  const traces = reply.statuses.filter((s) => s.status === 'TRACE');
  assert.deepEqual(
    traces.map((s) => `${s.trace} ${s.traceStatus}`),
    ['0 RUNNING', '0 COMPLETED', '1 RUNNING', '1 COMPLETED', '2 RUNNING', '2 COMPLETED'],
  );
  assert.equal(reply.status, 'COMPLETED');
});

test("a failing trace fails the session naming it; the earlier traces' statuses stand", async () => {
  const seen: string[] = [];
  await assert.rejects(
    env.ndif.session(
      'gpt2-tiny',
      [
        { input: 'Hi', block: async () => 1 },
        {
          input: 'Hi',
          block: async (m: any) => {
            await m.transformer.h[9].output;
          },
        },
      ],
      { onTrace: (t) => seen.push(`${t.trace} ${t.status}`) },
    ),
    (e: unknown) => e instanceof RemoteError && e.type === 'UnknownModule' && /^trace 1: /.test(e.remoteMessage),
  );
  assert.deepEqual(seen, ['0 RUNNING', '0 COMPLETED', '1 RUNNING', '1 ERROR']);
});

test('bad sessions are refused before anything is sent or recorded', async () => {
  await assert.rejects(env.ndif.session('gpt2-tiny', []), RequestShapeError);
  await assert.rejects(
    env.ndif.session('gpt2-tiny', [{ input: 'Hi' }], { maxNewTokens: 2 }),
    (e: unknown) => e instanceof RequestShapeError && /belong to each trace \(maxNewTokens/.test(e.message),
  );
  await assert.rejects(
    env.ndif.session('gpt2-tiny', [{ input: 'Hi', block: 'async (m) => {' }]),
    (e: unknown) =>
      e instanceof FabricHttpError && e.code === 'BLOCK_SYNTAX_ERROR' && (e.details as { trace: number }).trace === 0,
  );
  const raw = await env.ndif.http
    .json('POST', '/requests', {
      body: { model: 'gpt2-tiny', invokes: [{ input: 'a' }], traces: [{ invokes: [{ input: 'a' }] }] },
    })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.ok(raw instanceof FabricHttpError && raw.code === 'API_INVALID_BODY', String(raw));
  // A session of one trace is an ordinary result of one trace.
  const [only] = await env.ndif.session<[Tensor]>('gpt2-tiny', [
    { input: 'Hi', block: async (m: any) => (await m.output).slice(0, -1) },
  ]);
  assert.deepEqual(only.shape, [50257]);
});
