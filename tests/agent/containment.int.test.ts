// No block, however wrong, ends the agent. Each case below runs on one real agent process (dist/fabric/gpu-agent.js,
// a trusted key unless said otherwise) against a real control plane: the request that misbehaves fails with a coded
// error naming the user's line, the agent's boot id never changes (no restart, no second AgentRegistered), and the
// next request on the same replica completes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, spawnAgent, type AgentProcess, type Harness, type TestEvent } from './harness.js';

const PROMPT = 'The Eiffel Tower is in';
const GOOD = 'async (m) => (await m.transformer.h[0].output).shape';

describe('containment: a misbehaving block fails only its own request', () => {
  let h: Harness;
  let agent: AgentProcess;
  let bootId: string;
  let n = 0;

  before(async () => {
    h = await startHarness();
    agent = spawnAgent(h, 'agent-c1');
    bootId = await agent.ready;
    await h.deploy('gpt2-tiny');
    await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
  });
  after(async () => {
    await agent?.stop();
    await h?.close();
  });

  /** Runs `block`, expects it to fail; then checks the agent is the same process and serves a good request. */
  async function failsAlone(block: string, opts: { trusted?: boolean } = {}): Promise<TestEvent> {
    const id = `c-${++n}`;
    await h.submit(id, [{ prompt: PROMPT, block }], opts);
    const failed = await h.waitFor(`request-${id}`, 'RequestFailed', undefined, 45_000);
    const good = `c-${n}-after`;
    await h.submit(good, [{ prompt: PROMPT, block: GOOD }]);
    await h.waitFor(`request-${good}`, 'RequestCompleted', undefined, 45_000);
    const registrations = (await h.events('agent-agent-c1')).filter((e) => e.type === 'AgentRegistered');
    assert.equal(registrations.length, 1, 'the agent registered once: it never restarted');
    assert.equal(registrations[0]!.data.bootId, bootId);
    assert.equal(agent.child.exitCode, null, 'the agent process is still running');
    const stream = await h.events(`request-${id}`);
    assert.equal(stream.filter((e) => e.type === 'RequestDispatched').length, 1, 'one attempt: nothing was requeued');
    return failed;
  }

  it("a forgotten await (the red team's case) is UnawaitedRead naming the line, not a crashed agent", async () => {
    const failed = await failsAlone('async (m) => {\n  m.transformer.h[0].output;\n  return 1;\n}');
    assert.equal(failed.data.errorType, 'UnawaitedRead');
    assert.match(
      failed.data.message,
      /the read of transformer\.h\.0\.output\.0 \(line 2, column \d+\) was never awaited/,
    );
    assert.match(failed.data.stack, /block-0\.js:2/);
  });

  it('the same forgotten await in a sandbox runner (untrusted) is the same error', async () => {
    const failed = await failsAlone('async (m) => {\n  m.transformer.h[0].output;\n  return 1;\n}', { trusted: false });
    assert.equal(failed.data.errorType, 'UnawaitedRead');
    assert.match(failed.data.message, /line 2/);
  });

  it('a read awaited only by an async function the block did not wait for: "still pending when the block returned"', async () => {
    const failed = await failsAlone(
      'async (m) => {\n  (async () => { await m.transformer.h[1].output; })();\n  return 1;\n}',
    );
    assert.equal(failed.data.errorType, 'UnawaitedRead');
    assert.match(
      failed.data.message,
      /transformer\.h\.1\.output\.0 \(line 2, column \d+\) was still pending when the block returned/,
    );
  });

  it('an unhandled rejection is UnhandledRejection naming the line', async () => {
    const failed = await failsAlone(
      "async (m) => {\n  Promise.reject(new Error('nobody catches me'));\n  return 1;\n}",
    );
    assert.equal(failed.data.errorType, 'UnhandledRejection');
    assert.match(failed.data.message, /\(line 2, column \d+\): Error: nobody catches me/);
  });

  it('a rejection with a non-Error value, while the block waits', async () => {
    const failed = await failsAlone(
      'async (m) => {\n  Promise.reject(42);\n  await m.transformer.h[1].output;\n  return 1;\n}',
    );
    assert.equal(failed.data.errorType, 'UnhandledRejection');
    assert.match(failed.data.message, /42 \(the value thrown is not an Error, so it carries no line\)/);
  });

  it('a timer callback that throws is UncaughtException naming the line', async () => {
    const failed = await failsAlone(
      "async (m) => {\n  setTimeout(() => {\n    throw new TypeError('from a timer');\n  }, 1);\n  await new Promise((r) => setTimeout(r, 100));\n  return 1;\n}",
    );
    assert.equal(failed.data.errorType, 'UncaughtException');
    assert.match(failed.data.message, /\(line 3, column \d+\): TypeError: from a timer/);
  });

  it('an interval the block leaves running is cleared when its request ends', async () => {
    await h.submit('c-interval', [
      {
        prompt: PROMPT,
        block:
          "async (m) => {\n  globalThis.__ticks = 0;\n  setInterval(() => { globalThis.__ticks++; if (globalThis.__ticks > 1000) throw new Error('late'); }, 2);\n  await new Promise((r) => setTimeout(r, 30));\n  return globalThis.__ticks;\n}",
      },
    ]);
    const first = await h.waitFor('request-c-interval', 'RequestCompleted');
    const { decodeResultContainer } = await import('../../protocol/result-container.js');
    const ticksThen = decodeResultContainer((await h.blobs.get(first.data.resultRef)).bytes).invokes[0]!.tree;
    assert.ok(typeof ticksThen === 'number' && ticksThen > 0, `the interval ticked during its request (${ticksThen})`);
    await h.submit('c-ticks', [
      {
        prompt: PROMPT,
        block:
          'async (m) => { const a = globalThis.__ticks; await new Promise((r) => setTimeout(r, 150)); return [a, globalThis.__ticks]; }',
      },
    ]);
    const done = await h.waitFor('request-c-ticks', 'RequestCompleted');
    const [a, b] = decodeResultContainer((await h.blobs.get(done.data.resultRef)).bytes).invokes[0]!.tree as number[];
    assert.ok(a! > 0, 'the interval ran while its request did');
    assert.equal(b, a, 'and not after it ended');
  });

  it('a microtask that throws is contained', async () => {
    const failed = await failsAlone(
      "async (m) => {\n  queueMicrotask(() => { throw new RangeError('from a microtask'); });\n  await m.transformer.h[1].output;\n}",
    );
    assert.equal(failed.data.errorType, 'UncaughtException');
    assert.match(failed.data.message, /RangeError: from a microtask/);
  });

  it('process.nextTick callbacks that throw are contained too', async () => {
    const failed = await failsAlone(
      "async (m) => {\n  process.nextTick(() => { throw new Error('tick'); });\n  await m.transformer.h[1].output;\n}",
    );
    assert.equal(failed.data.errorType, 'UncaughtException');
    assert.match(failed.data.message, /Error: tick/);
  });

  it("a getter that throws in the returned value is the block's error", async () => {
    const failed = await failsAlone("async (m) => ({ get x() { throw new Error('getter says no'); } })");
    assert.equal(failed.data.errorType, 'BlockError');
    assert.match(failed.data.message, /getter says no/);
  });

  it('a thrown value whose toJSON and toString throw still gives an error', async () => {
    const failed = await failsAlone(
      "async (m) => { throw { toJSON() { throw new Error('a'); }, toString() { throw new Error('b'); } }; }",
    );
    assert.equal(failed.data.errorType, 'BlockError');
    assert.match(failed.data.message, /non-Error value/);
  });

  it('a Proxy whose traps throw, returned and thrown', async () => {
    const returned = await failsAlone(
      "async (m) => new Proxy({}, { getPrototypeOf() { throw new Error('trap'); }, ownKeys() { throw new Error('trap'); } })",
    );
    assert.equal(returned.data.errorType, 'BlockError');
    assert.match(returned.data.message, /trap/);
    const thrown = await failsAlone(
      'async (m) => { const { proxy, revoke } = Proxy.revocable({}, {}); revoke(); throw proxy; }',
    );
    assert.equal(thrown.data.errorType, 'BlockError');
  });

  it('a returned thenable whose then throws', async () => {
    const failed = await failsAlone("async (m) => ({ then() { throw new Error('bad thenable'); } })");
    assert.equal(failed.data.errorType, 'BlockError');
    assert.match(failed.data.message, /bad thenable/);
  });

  it('a result shaped like the encoding ({ $tensor: 5 }) is saved as plain data', async () => {
    await h.submit('c-enc', [
      { prompt: PROMPT, block: "async (m) => ({ $tensor: 5, nested: { $number: 'NaN' }, $$x: 1 })" },
    ]);
    const done = await h.waitFor('request-c-enc', 'RequestCompleted');
    const { decodeResultContainer, materializeTree } = await import('../../protocol/result-container.js');
    const c = decodeResultContainer((await h.blobs.get(done.data.resultRef)).bytes);
    assert.deepEqual(c.invokes[0]!.tensors, []);
    assert.deepEqual(
      materializeTree(c.invokes[0]!, () => 'TENSOR'),
      { $tensor: 5, nested: { $number: 'NaN' }, $$x: 1 },
    );
  });
});
