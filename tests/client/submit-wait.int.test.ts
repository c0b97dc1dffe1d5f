// A trace whose progress nobody reads as it comes waits for its final status in its submission (POST /requests?waitMs)
// and needs no status websocket; one that logs, outlasts the wait, has a result too large to come inline, or asks for
// none of it (submitWaitMs: 0) is followed on the websocket as before, with the same values, logs and errors.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Fabric, RemoteError } from '../../client/sdk/index.js';
import { startInProcessFabric, type InProcessFabric } from './fabric-harness.js';

let fab: InProcessFabric;
const clients: Fabric[] = [];

before(async () => {
  fab = await startInProcessFabric();
  // Deployed and warm before the cases below.
  await client().trace('gpt2-tiny', 'warm up', async (m: any) => (await m.transformer.h[0].output).shape);
});

after(async () => {
  for (const c of clients) c.close();
  await fab.close();
});

function client(opts: { submitWaitMs?: number } = {}): Fabric {
  const c = new Fabric({ url: fab.url, progress: false, onLog: null, ...opts });
  clients.push(c);
  return c;
}

/** Whether the client ever opened its status websocket. */
const openedWebsocket = (c: Fabric) => (c as unknown as { socket: { ws: unknown } }).socket.ws !== null;

const PROMPT = 'The Eiffel Tower is in';
const shapeOf = async (m: any) => (await m.transformer.h[1].output).shape;

describe('submit and wait', () => {
  it('a quiet trace is answered by its submission: no status websocket', async () => {
    const c = client();
    assert.deepEqual(await c.trace('gpt2-tiny', PROMPT, shapeOf), [1, 7, 64]);
    assert.equal(openedWebsocket(c), false);
  });

  it('with submitWaitMs: 0 it follows the websocket from the start, with the same value', async () => {
    const c = client({ submitWaitMs: 0 });
    assert.deepEqual(await c.trace('gpt2-tiny', PROMPT, shapeOf), [1, 7, 64]);
    assert.equal(openedWebsocket(c), true);
  });

  it('a result above the inline limit comes over the websocket as its binary frame, whole', async () => {
    const c = client();
    const logits = await c.trace('gpt2-tiny', PROMPT, async (m: any) => await m.output);
    const ws = await client({ submitWaitMs: 0 }).trace('gpt2-tiny', PROMPT, async (m: any) => await m.output);
    assert.ok(logits.data.byteLength > 256 * 1024);
    const bits = (t: typeof logits) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    assert.ok(bits(logits).equals(bits(ws)));
    assert.equal(openedWebsocket(c), true);
  });

  it('a block that logs: every line reaches onLog, in order, through the websocket', async () => {
    const c = client();
    const lines: string[] = [];
    const value = await c.trace(
      'gpt2-tiny',
      PROMPT,
      async (m: any) => {
        console.log('one');
        console.log('two');
        return (await m.transformer.h[0].output).shape;
      },
      { onLog: (l) => lines.push(l.line) },
    );
    assert.deepEqual(value, [1, 7, 64]);
    assert.deepEqual(lines, ['one', 'two']);
    assert.equal(openedWebsocket(c), true);
  });

  it('a request that outlasts the wait is followed on the websocket to its value', async () => {
    const c = client({ submitWaitMs: 20 });
    const value = await c.trace('gpt2-tiny', PROMPT, async (m: any) => {
      await new Promise((r) => setTimeout(r, 300));
      return (await m.transformer.h[0].output).shape;
    });
    assert.deepEqual(value, [1, 7, 64]);
    assert.equal(openedWebsocket(c), true);
  });

  it("a block that throws: the same RemoteError, with the block's stack, as over the websocket", async () => {
    const fails = async (m: any) => {
      await m.transformer.h[0].output;
      throw new RangeError('nope');
    };
    const errorOf = async (c: Fabric) => {
      try {
        await c.trace('gpt2-tiny', PROMPT, fails);
      } catch (e) {
        return e as RemoteError;
      }
      throw new Error('the trace did not fail');
    };
    const waited = client();
    const [a, b] = [await errorOf(waited), await errorOf(client({ submitWaitMs: 0 }))];
    assert.ok(a instanceof RemoteError);
    assert.equal(openedWebsocket(waited), false);
    const facts = (e: RemoteError) => [e.phase, e.type, e.remoteMessage, e.remoteStack, e.userPlace];
    assert.deepEqual(facts(a), facts(b));
    assert.equal(a.message.replace(a.requestId, '<id>'), b.message.replace(b.requestId, '<id>'));
  });

  it('submitWaitMs out of range is refused when the client is made', () => {
    assert.throws(() => new Fabric({ url: fab.url, submitWaitMs: 10_001 }), /submitWaitMs 10001/);
    assert.throws(() => new Fabric({ url: fab.url, submitWaitMs: -1 }), /submitWaitMs -1/);
  });
});
