// Generation through the whole fabric in this process (SDK → HTTP → SQLite event store → scheduler → relay → agent →
// runtime and back): generation options in the request, tokens streamed as RequestTokensGenerated events and STREAM
// messages of the status websocket, `ndif.stream` yielding every token once and in order across a websocket that is
// cut under it, the same tokens and text as the result, sampling reproducible by seed, and bad options refused at
// submission with their code.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type Fabric, FabricHttpError } from '../../client/sdk/index.js';
import type { StatusMessage, StreamedToken } from '../../client/sdk/index.js';
import { runNdif } from '../support/ndif.js';
import { withFabricClient } from './fabric-harness.js';

const env = withFabricClient();

const cut = (f: Fabric) => (f as unknown as { socket: { tcp: { destroy(): void } } }).socket.tcp.destroy();

/** A block that slows each step a little, so the stream is cut while tokens are still coming. */
const slowSteps = async (m: any) => {
  await m.all(async () => {
    await new Promise((r) => setTimeout(r, 25));
  });
  return 'done';
};

describe('streaming generation', () => {
  it("ndif.stream yields every token once, in order, across a websocket reconnect; the text and tokens are the result's", async () => {
    const messages: StatusMessage[] = [];
    let cutDone = false;
    const s = env.ndif.stream('gpt2-tiny', ['The Eiffel Tower is in', 'Hello'], slowSteps, {
      maxNewTokens: 24,
      ignoreEos: true,
      onMessage: (m) => {
        messages.push(m);
        if (m.status === 'STREAM' && !cutDone) {
          cutDone = true;
          cut(env.ndif);
        }
      },
    });
    const got: StreamedToken[] = [];
    for await (const t of s) got.push(t);
    const r = await s.result;
    assert.deepEqual(r.values, ['done', 'done']);
    const generated = r.meta.generated as number[][];
    for (const invoke of [0, 1]) {
      const mine = got.filter((t) => t.invoke === invoke);
      assert.deepEqual(
        mine.map((t) => t.step),
        Array.from({ length: 24 }, (_, i) => i),
        `invoke ${invoke}: steps 0..23, once each`,
      );
      assert.deepEqual(
        mine.map((t) => t.token),
        generated[invoke],
        `invoke ${invoke}: the result's tokens`,
      );
      assert.ok(
        mine.every((t) => typeof t.text === 'string'),
        'each token has its text',
      );
      assert.deepEqual(mine[23]!.finish, { reason: 'length', step: 23 });
    }
    const streamed = messages.filter((m) => m.status === 'STREAM').flatMap((m) => m.tokens!);
    const keys = streamed.map((t) => `${t.invoke}:${t.step}`);
    assert.equal(new Set(keys).size, keys.length, 'the websocket sent no token twice after the reconnect');
    assert.equal(keys.length, 48, 'every token came over the websocket (none had to be filled in from the result)');
    assert.ok(
      messages.filter((m) => m.status === 'STREAM').length > 1,
      'tokens arrive while they are generated, in several messages',
    );
    assert.ok(messages.findIndex((m) => m.status === 'STREAM') < messages.findIndex((m) => m.status === 'COMPLETED'));
    assert.equal(messages[messages.length - 1]!.status, 'COMPLETED');
  });

  it('sampling options travel with the request; the same seed gives the same tokens, another seed others', async () => {
    const gen = (seed: number) =>
      env.ndif.execute('gpt2-tiny', 'Once upon a time', undefined, {
        maxNewTokens: 10,
        temperature: 0.9,
        topP: 0.95,
        seed,
        ignoreEos: true,
      });
    const [a, b, c] = [await gen(5), await gen(5), await gen(6)];
    assert.deepEqual(a.meta.generated, b.meta.generated);
    assert.notDeepEqual(a.meta.generated, c.meta.generated);
    assert.deepEqual(a.meta.seeds, [5]);
    assert.equal(a.meta.cache, 'past');
    assert.deepEqual(a.meta.finish, [{ reason: 'length', step: 9 }]);
    // Per-invoke options: a stop token ends the first row at its first token, the second goes on.
    const first = (a.meta.generated as number[][])[0]![0]!;
    const two = await env.ndif.execute(
      'gpt2-tiny',
      [{ input: 'Once upon a time', generation: { stopTokenIds: [first] } }, 'Once upon a time'],
      undefined,
      { maxNewTokens: 10, temperature: 0.9, topP: 0.95, seed: 5, ignoreEos: true },
    );
    assert.deepEqual((two.meta.generated as number[][])[0], [first]);
    assert.deepEqual(
      (two.meta.finish as Array<{ reason: string }>).map((f) => f.reason),
      ['stop-token', 'length'],
    );
  });

  it('bad generation options are refused at submission with their code (nothing is recorded)', async () => {
    const refused = async (opts: Parameters<Fabric['trace']>[3], code: string) => {
      await assert.rejects(
        env.ndif.trace('gpt2-tiny', 'Hi', undefined, opts),
        (e: unknown) => e instanceof FabricHttpError && e.status === 400 && e.code === code,
      );
    };
    await refused({ maxNewTokens: 4, topP: 0 }, 'GENERATION_BAD_TOP_P');
    await refused({ maxNewTokens: 4, temperature: -1 }, 'GENERATION_BAD_TEMPERATURE');
    await refused({ maxNewTokens: 4, stop: '' }, 'GENERATION_EMPTY_STOP');
    await refused({ maxNewTokens: 4, generation: { cache: 'yes' as never } }, 'GENERATION_BAD_OPTION');
    // maxNewTokens beyond the model's positions is known on the agent, before anything runs: the request fails in validation.
    await assert.rejects(
      env.ndif.trace('gpt2-tiny', 'Hi', undefined, { maxNewTokens: 200 }),
      (e: unknown) =>
        (e as { type?: string; phase?: string }).type === 'GENERATION_TOO_LONG' &&
        (e as { phase?: string }).phase === 'validation',
    );
  });
});

describe('ndif generate', () => {
  it('prints the text as it is generated, then why it ended; --json gives one line per token and the result', async () => {
    const run = (args: string[]) => runNdif(args, { NDIF_URL: env.fab.url });
    const j = await run(['generate', 'gpt2-tiny', 'The Eiffel Tower is in', '-n', '6', '--ignore-eos', '--json']);
    assert.equal(j.code, 0, j.err);
    const lines = j.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const last = lines.pop();
    assert.deepEqual(
      lines.map((t) => t.step),
      [0, 1, 2, 3, 4, 5],
    );
    assert.deepEqual(last.generated, [lines.map((t) => t.token)]);
    assert.deepEqual(last.finish, [{ reason: 'length', step: 5 }]);
    const t = await run(['generate', 'gpt2-tiny', 'The Eiffel Tower is in', '-n', '6', '--ignore-eos']);
    assert.equal(t.code, 0, t.err);
    assert.equal(t.out, `${lines.map((x) => x.text).join('')}\n`, 'the streamed text, then a newline');
    assert.match(t.err, /length · 6 tokens · cache past/);
    const bad = await run(['generate', 'gpt2-tiny', 'Hi', '--top-p', '0']);
    assert.equal(bad.code, 1);
    assert.match(bad.err, /GENERATION_BAD_TOP_P/);
  });
});
