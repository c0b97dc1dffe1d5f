// The status websocket on a real socket over the real control plane (scheduler stepped, agent reports executed as
// commands): the full status sequence when subscribing before submitting, the replay when subscribing after,
// resubscription with a cursor (nothing missed, nothing twice), true queue positions as they change, a requeue
// back to QUEUED, ERROR with the user's stack, CANCELLED.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { decodeResultContainer } from '../../protocol/result-container.js';
import { type ReportingAgent, settle, startApiWithAgent, submitBody, type ApiHarness } from '../command-api/harness.js';
import { statusHubOf } from '../../query-api/build.js';
import { TestSocket, type WsMessage } from './ws-client.js';

let h: ApiHarness;
let agent: ReportingAgent;
let url: string;

before(async () => {
  ({ h, url, agent } = await startApiWithAgent());
});
after(() => h.close());

async function submit(requestId: string, extra: Record<string, unknown> = {}) {
  const r = await h.app.inject({ method: 'POST', url: '/requests', payload: submitBody({ requestId, ...extra }) });
  assert.equal(r.statusCode, 202, r.body);
  await h.view.catchUp();
}

/** Runs the request the agent has for `requestId`: started, two log lines, completed. Returns the result bytes. */
async function run(requestId: string, elements = 4): Promise<Uint8Array> {
  const d = (await agent.dispatched()).find((x) => x.requestId === requestId);
  assert.ok(d, `${requestId} is dispatched to the agent`);
  await agent.started(requestId, d.attempt);
  await agent.log(requestId, d.attempt, 'shape [1,6,64]');
  await agent.log(requestId, d.attempt, 'a warning', 'stderr');
  return agent.complete(requestId, d.attempt, elements);
}

const names = (ms: WsMessage[]) => ms.map((m) => m.status);

describe('status websocket', () => {
  it('subscribed before submitting: RECEIVED, PROVISIONING, DEPLOYING, QUEUED, DISPATCHED, RUNNING, LOG, LOG, COMPLETED', async () => {
    const ws = await TestSocket.open(url);
    await ws.until((m) => m[0]?.type === 'hello', 'hello');
    assert.equal(ws.messages[0]!.protocol, '1.0');
    await ws.subscribe('r-first');
    await submit('r-first');
    await settle(h, [agent]);
    const bytes = await run('r-first');
    await ws.untilStatus('r-first', 'COMPLETED');
    await ws.until((m) => m.some((x) => x.type === 'ended'), 'ended');
    const s = ws.statuses('r-first');
    assert.deepEqual(names(s), [
      'RECEIVED',
      'PROVISIONING',
      'DEPLOYING',
      'QUEUED',
      'DISPATCHED',
      'RUNNING',
      'LOG',
      'LOG',
      'COMPLETED',
    ]);
    assert.ok(s.every((m) => m.replay === false));
    const positions = s.map((m) => Number(String(m.cursor).split(':')[0]));
    for (let i = 1; i < positions.length; i++)
      assert.ok(positions[i]! > positions[i - 1]!, `cursors increase: ${positions.join(',')}`);
    assert.equal(s[1]!.position, 0);
    assert.deepEqual(
      s[1]!.deployment,
      { phase: 'NONE', lastFailure: null },
      'not deployed yet: the scheduler deploys it on demand',
    );
    assert.equal(s[3]!.position, 0);
    assert.equal(s[4]!.replicaId, 'gpt2-tiny#1');
    assert.equal(s[6]!.line, 'shape [1,6,64]');
    assert.equal(s[7]!.stream, 'stderr');
    const done = s[8]!;
    assert.equal(done.bytes, bytes.byteLength);
    assert.ok(typeof done.inline === 'string', 'a small result is inline');
    assert.deepEqual(Buffer.from(done.inline as string, 'base64'), Buffer.from(bytes));
    const decoded = decodeResultContainer(new Uint8Array(Buffer.from(done.inline as string, 'base64')));
    assert.deepEqual(decoded.invokes[0]!.tree, { out: { $tensor: 0 } });
    assert.deepEqual(ws.messages.at(-1), { type: 'ended', requestId: 'r-first', reason: 'finished' });
    await ws.close();
  });

  it('results: "binary" sends the result container as the binary frame after COMPLETED; statuses: "final" only LOG and the final status', async () => {
    const ws = await TestSocket.open(url);
    ws.send({ type: 'subscribe', requestId: 'r-first', results: 'binary', statuses: 'final' });
    await ws.until((m) => m.some((x) => x.type === 'ended'), 'ended');
    const s = ws.statuses('r-first');
    assert.deepEqual(names(s), ['LOG', 'LOG', 'COMPLETED']);
    const done = s[2]!;
    assert.equal(done.binary, true);
    assert.equal(done.inline, undefined);
    assert.equal(done.url, undefined);
    const i = ws.messages.indexOf(done);
    const frame = ws.messages[i + 1]!;
    assert.equal(frame.type, 'binary', 'the binary frame comes right after its COMPLETED message');
    const data = frame.data as Buffer;
    assert.equal(data.byteLength, done.bytes);
    assert.equal(createHash('sha256').update(data).digest('hex'), done.sha256);
    assert.deepEqual(decodeResultContainer(new Uint8Array(data)).invokes[0]!.tree, { out: { $tensor: 0 } });
    assert.deepEqual(ws.messages.at(-1), { type: 'ended', requestId: 'r-first', reason: 'finished' });
    await ws.close();
  });

  it('subscribe refuses results or statuses it does not know (WS_BAD_MESSAGE)', async () => {
    const ws = await TestSocket.open(url);
    ws.send({ type: 'subscribe', requestId: 'r-first', results: 'base64' });
    ws.send({ type: 'subscribe', requestId: 'r-first', statuses: 'some' });
    await ws.until((m) => m.filter((x) => x.type === 'error').length === 2, 'two refusals');
    const errors = ws.messages.filter((x) => x.type === 'error');
    assert.deepEqual(
      errors.map((e) => [e.code, String(e.message).split(':')[0]]),
      [
        ['WS_BAD_MESSAGE', 'results'],
        ['WS_BAD_MESSAGE', 'statuses'],
      ],
    );
    assert.equal(ws.statuses('r-first').length, 0, 'nothing was subscribed');
    await ws.close();
  });

  it('subscribed after it finished: the whole history replayed, then ended', async () => {
    const ws = await TestSocket.open(url);
    await ws.subscribe('r-first');
    await ws.until((m) => m.some((x) => x.type === 'ended'), 'ended');
    const s = ws.statuses('r-first');
    assert.deepEqual(names(s), ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING', 'LOG', 'LOG', 'COMPLETED']);
    assert.ok(s.every((m) => m.replay === true));
    assert.equal(s[1]!.position, null, "a past wait's position is not recorded");
    assert.equal(typeof s[6]!.inline, 'string');
    await ws.close();
  });

  it('resubscribing with the last cursor: nothing missed, nothing twice (compared with a socket that stayed)', async () => {
    const steady = await TestSocket.open(url);
    await steady.subscribe('r-resume');
    const flaky = await TestSocket.open(url);
    await flaky.subscribe('r-resume');
    await submit('r-resume');
    await flaky.untilStatus('r-resume', 'QUEUED');
    const firstPart = flaky.statuses('r-resume');
    await flaky.close();
    await settle(h, [agent]);
    const req = (await agent.dispatched()).find((x) => x.requestId === 'r-resume')!;
    await agent.started('r-resume', req.attempt);
    await agent.log('r-resume', req.attempt, 'one');
    const again = await TestSocket.open(url);
    await again.subscribe('r-resume', String(firstPart.at(-1)!.cursor));
    await agent.log('r-resume', req.attempt, 'two');
    await agent.complete('r-resume', req.attempt);
    await again.untilStatus('r-resume', 'COMPLETED');
    await steady.untilStatus('r-resume', 'COMPLETED');
    const stitched = [...firstPart, ...again.statuses('r-resume')].map((m) => ({
      status: m.status,
      cursor: m.cursor,
      line: m.line,
    }));
    const continuous = steady.statuses('r-resume').map((m) => ({ status: m.status, cursor: m.cursor, line: m.line }));
    assert.deepEqual(stitched, continuous);
    assert.deepEqual(names(steady.statuses('r-resume')), [
      'RECEIVED',
      'QUEUED',
      'DISPATCHED',
      'RUNNING',
      'LOG',
      'LOG',
      'COMPLETED',
    ]);
    await Promise.all([steady.close(), again.close()]);
  });

  it('a waiting request is told each new true position until it is dispatched', async () => {
    const ws = await TestSocket.open(url);
    for (const id of ['r-q1', 'r-q2', 'r-q3']) await ws.subscribe(id);
    for (const id of ['r-q1', 'r-q2', 'r-q3']) await submit(id);
    await settle(h, [agent]);
    await ws.untilStatus('r-q1', 'DISPATCHED');
    const queue = (await h.app.inject({ method: 'GET', url: '/queue?model=gpt2-tiny' })).json();
    assert.deepEqual(
      queue.queues[0].entries.map((e: { requestId: string }) => e.requestId),
      ['r-q2', 'r-q3'],
    );
    await ws.until(
      (m) => m.some((x) => x.requestId === 'r-q3' && x.status === 'QUEUED' && x.position === 1),
      'r-q3 at position 1',
    );
    for (const id of ['r-q1', 'r-q2', 'r-q3']) {
      await run(id);
      await settle(h, [agent]);
    }
    await ws.untilStatus('r-q3', 'COMPLETED');
    const q3 = ws
      .statuses('r-q3')
      .filter((m) => m.status === 'QUEUED')
      .map((m) => m.position);
    assert.deepEqual(q3, [2, 1, 0]);
    const q2 = ws
      .statuses('r-q2')
      .filter((m) => m.status === 'QUEUED')
      .map((m) => m.position);
    assert.deepEqual(q2, [1, 0]);
    await ws.close();
  });

  it('a requeue (agent restarted mid-run) shows QUEUED again with the reason, then completes on attempt 2', async (t) => {
    const ws = await TestSocket.open(url);
    await ws.subscribe('r-requeue');
    await submit('r-requeue');
    await settle(h, [agent]);
    const d = (await agent.dispatched()).find((x) => x.requestId === 'r-requeue')!;
    await agent.started('r-requeue', d.attempt);
    await ws.untilStatus('r-requeue', 'RUNNING');
    await agent.restart();
    await settle(h, [agent]);
    const d2 = (await agent.dispatched()).find((x) => x.requestId === 'r-requeue')!;
    assert.equal(d2.attempt, d.attempt + 1);
    await agent.started('r-requeue', d2.attempt);
    await agent.complete('r-requeue', d2.attempt);
    await ws.untilStatus('r-requeue', 'COMPLETED');
    const s = ws.statuses('r-requeue');
    const seq = names(s);
    t.diagnostic(seq.join(' '));
    const i = seq.indexOf('RUNNING');
    assert.deepEqual(seq.slice(0, i + 1), ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING']);
    const requeued = s[i + 1]!;
    assert.ok(['QUEUED', 'DEPLOYING'].includes(requeued.status as string), String(requeued.status));
    assert.equal((requeued.requeued as { reason: string }).reason, 'AGENT_RESTARTED');
    assert.deepEqual(seq.slice(-4), ['QUEUED', 'DISPATCHED', 'RUNNING', 'COMPLETED']);
    assert.equal(s.at(-1)!.attempt, d2.attempt);
    assert.equal(seq.filter((x) => x === 'COMPLETED').length, 1);
    await ws.close();
  });

  it("ERROR carries phase, type, message and the user's stack; CANCELLED says by whom", async () => {
    const ws = await TestSocket.open(url);
    await ws.subscribe('r-err');
    await ws.subscribe('r-cancel');
    await submit('r-err');
    await submit('r-cancel');
    await settle(h, [agent]);
    const d = (await agent.dispatched()).find((x) => x.requestId === 'r-err')!;
    await agent.fail(
      'r-err',
      d.attempt,
      'TypeError: x is not a function',
      'TypeError: x is not a function\n    at block-0.js:3:5',
    );
    await h.app.inject({ method: 'POST', url: '/requests/r-cancel/cancel' });
    await ws.untilStatus('r-err', 'ERROR');
    await ws.untilStatus('r-cancel', 'CANCELLED');
    const err = ws.statuses('r-err').at(-1)!;
    assert.deepEqual(err.error, {
      phase: 'execution',
      type: 'BlockError',
      message: 'TypeError: x is not a function',
      stack: 'TypeError: x is not a function\n    at block-0.js:3:5',
    });
    const c = ws.statuses('r-cancel').at(-1)!;
    assert.equal(c.by, 'operator');
    assert.equal(c.actor, 'local');
    await settle(h, [agent]);
    await ws.close();
  });

  it('bad messages get WS_BAD_MESSAGE / WS_BAD_CURSOR and the socket stays usable', async () => {
    const ws = await TestSocket.open(url);
    ws.ws.send('not json');
    ws.send({ type: 'subscribe' });
    ws.send({ type: 'dance' });
    ws.send({ type: 'subscribe', requestId: 'r-first', since: 'yesterday' });
    ws.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    ws.send({ type: 'ping' });
    await ws.until((m) => m.some((x) => x.type === 'pong'), 'pong');
    const codes = ws.messages.filter((m) => m.type === 'error').map((m) => m.code);
    assert.deepEqual(codes, ['WS_BAD_MESSAGE', 'WS_BAD_MESSAGE', 'WS_BAD_MESSAGE', 'WS_BAD_CURSOR', 'WS_BAD_MESSAGE']);
    await ws.close();
  });

  it('a plain GET /ws is 426 API_WEBSOCKET_REQUIRED; another websocket path is refused with 404', async () => {
    const r = await h.app.inject({ method: 'GET', url: '/ws' });
    assert.equal(r.statusCode, 426);
    assert.equal(r.json().code, 'API_WEBSOCKET_REQUIRED');
    const refused = await TestSocket.refused(url, {}, '/elsewhere');
    assert.equal(refused.status, 404);
    assert.equal(refused.body.code, 'API_ROUTE_NOT_FOUND');
  });

  it('leaves no subscription behind once requests finish or sockets close', async () => {
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(statusHubOf(h.app).size, 0);
  });
});
