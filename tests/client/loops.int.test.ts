// Loops through the whole fabric in this process (HTTP body `traces[].repeat`, the agent's runSession, throttled
// TRACE statuses carrying the step and the reported value): a 2,000-step loop in one request, its progress live
// (onTrace, onReport, the progress line) and in GET /requests/:id; a loop past its time limit names the iteration it
// reached; a session of more than 64 traces (the old form) is refused, a loop of 2,000 is not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FabricHttpError, RemoteError, RequestShapeError } from '../../client/sdk/index.js';
import type { ReportedProgress, TraceProgress } from '../../client/sdk/index.js';
import { withFabricClient } from './fabric-harness.js';

const env = withFabricClient();

test("a loop of 2,000 steps in one request: the last step's value, its state kept, progress live and in the history", async () => {
  const seen: TraceProgress[] = [];
  const reports: ReportedProgress[] = [];
  const lines: string[] = [];
  const r = await env.ndif.executeSession(
    'gpt2-tiny',
    [
      {
        input: 'The Eiffel Tower is in',
        // A running mean of layer 0's output at the last position, reported as it goes.
        block: async (m: any, ctx: any) => {
          const h = (await m.transformer.h[0].output).index(0).slice(-1);
          const s = ctx.shared;
          s.n = (s.n ?? 0) + 1;
          s.sum = s.sum === undefined ? h : s.sum.add(h);
          ctx.report({ step: ctx.iteration, first: s.sum.get(0) / s.n });
          return ctx.iteration === ctx.iterations - 1 ? { n: s.n, mean: s.sum.div(s.n), h } : null;
        },
        repeat: 2000,
      },
    ],
    {
      timeoutMs: 300_000,
      onTrace: (t) => seen.push(t),
      onReport: (x) => reports.push(x),
      progress: { write: (s: string) => lines.push(s), isTTY: false },
    },
  );
  const v = r.traces[0] as { n: number; mean: any; h: any };
  assert.equal(v.n, 2000, 'ctx.shared lasted through 2,000 steps');
  for (let i = 0; i < 64; i++)
    assert.ok(Math.abs(v.mean.get(i) - v.h.get(i)) <= 1e-5, 'the mean of one value is that value');
  assert.equal((r.meta.traces as Array<{ iterations: number }>)[0]!.iterations, 2000);

  assert.equal(seen[0]!.status, 'RUNNING');
  assert.equal(seen[0]!.done, 0);
  const end = seen.at(-1)!;
  assert.equal(end.status, 'COMPLETED');
  assert.equal(end.iterations, 2000);
  assert.equal(end.done, 2000);
  assert.equal(end.reported!.iteration, 1999);
  // Throttled (NDIF_PROGRESS_INTERVAL_MS, 1 s): the RUNNING statuses between start and end are at least 1 s apart.
  const between = seen.slice(1, -1);
  between.forEach((t, k) => {
    assert.equal(t.status, 'RUNNING');
    const before = k === 0 ? 0 : between[k - 1]!.ms!;
    assert.ok(t.ms! - before >= 999, `a progress status ${t.ms! - before} ms after the one before it`);
  });
  assert.ok(reports.length >= 1 && reports.at(-1)!.iteration === 1999, JSON.stringify(reports.slice(-2)));
  assert.deepEqual(
    [...new Set(reports.map((x) => x.iteration))],
    reports.map((x) => x.iteration),
    'onReport gets each reported value once',
  );
  assert.ok(
    lines.some((l) => /RUNNING trace 1 of 1 · step 2000 of 2000 · step 1999 first -?\d/.test(l)),
    `the progress line shows the step and the reported value: ${lines.join(' | ')}`,
  );

  const reply = await (await env.ndif.request(r.requestId).status()).reply;
  const traces = reply.statuses.filter((s) => s.status === 'TRACE');
  assert.deepEqual(traces.at(-1)!.done, 2000);
  assert.deepEqual(traces.at(-1)!.reported!.iteration, 1999);
});

test('a loop past its time limit fails with Timeout naming the iteration it reached', async () => {
  const seen: TraceProgress[] = [];
  await assert.rejects(
    env.ndif.session(
      'gpt2-tiny',
      [{ input: 'Hi', block: async (m: any) => (await m.transformer.h[0].output).shape, repeat: 1_000_000 }],
      { timeoutMs: 1500, onTrace: (t) => seen.push(t) },
    ),
    (e: unknown) => {
      assert.ok(e instanceof RemoteError, String(e));
      assert.equal(e.type, 'Timeout');
      const m = /^trace 0 iteration (\d+) of 1000000: /.exec(e.remoteMessage);
      assert.ok(m && Number(m[1]) > 0, e.remoteMessage);
      assert.equal(seen.at(-1)!.status, 'ERROR');
      assert.equal(seen.at(-1)!.done, Number(m![1]));
      return true;
    },
  );
});

test('a session holds at most 64 traces (the old form); a loop is one trace; bad repeats are refused', async () => {
  const post = (body: unknown) =>
    env.ndif.http.json('POST', '/requests', { body }).then(
      () => undefined,
      (e: unknown) => e,
    );
  const many = await post({
    model: 'gpt2-tiny',
    traces: Array.from({ length: 65 }, () => ({ invokes: [{ input: 'a' }] })),
  });
  assert.ok(
    many instanceof FabricHttpError && many.code === 'API_INVALID_BODY' && /at most 64 traces/.test(many.message),
    String(many),
  );
  const batch = await post({
    model: 'gpt2-tiny',
    traces: [{ invokes: [{ input: 'a' }], repeat: { times: 2, batch: 2 } }],
  });
  assert.ok(
    batch instanceof FabricHttpError && batch.code === 'API_INVALID_BODY' && /repeat\.batch/.test(batch.message),
    String(batch),
  );
  const zero = await post({ model: 'gpt2-tiny', traces: [{ invokes: [{ input: 'a' }], repeat: { times: 0 } }] });
  assert.ok(zero instanceof FabricHttpError && zero.code === 'API_INVALID_BODY', String(zero));
  await assert.rejects(env.ndif.session('gpt2-tiny', [{ input: 'a', repeat: 0 }]), RequestShapeError);
  const version = (await env.ndif.http.json('GET', '/version')) as { capabilities: string[] };
  assert.ok(version.capabilities.includes('session-loops'), 'the fabric says it runs loops');
});
