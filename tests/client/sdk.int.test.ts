// The SDK against a real fabric in this process (SQLite store, control plane, scheduler, relay, one GPU agent,
// the embedded HTTP server on a free port): traces, statuses, logs, errors, cancel, non-blocking mode, download
// URLs, reconnects and the version handshake.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  Fabric,
  CancelledError,
  ClientTimeoutError,
  FabricHttpError,
  ProtocolError,
  ProtocolMismatchError,
  RemoteError,
  Tensor,
} from '../../client/sdk/index.js';
import type { StatusMessage } from '../../client/sdk/index.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { materializeTree } from '../../protocol/result-container.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { tamperStoredBlob } from '../blobstore/tamper.js';
import { startInProcessFabric } from './fabric-harness.js';
import type { InProcessFabric } from './fabric-harness.js';

let fab: InProcessFabric;
let ndif: Fabric;
let direct: HostedModel;

const PROMPT = 'The Eiffel Tower is in';
const readAndSwap = async (m: any) => {
  const mlp = await m.transformer.h[0].mlp.output;
  m.transformer.h[0].mlp.output = mlp.mul(0);
  const h = await m.transformer.h[1].output;
  return { mlp, h, logits: await m.output };
};

/** The same block run on the runtime directly (what the fabric must reproduce bit for bit). */
async function runDirect(block: string, prompt = PROMPT, newTokens = 0) {
  const r = await direct.run({ invokes: [{ prompt, block }], newTokens }, () =>
    createInProcessBlocks({ manifest: direct.manifest(), tokenizer: direct.tokenizer }),
  );
  return {
    value: materializeTree(r.invokes[0]!.result, (p) => Tensor.fromPayload(p)) as Record<string, Tensor>,
    run: r,
  };
}

const bitsOf = (t: Tensor) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);

before(async () => {
  fab = await startInProcessFabric();
  ndif = new Fabric({ url: fab.url, progress: false, onLog: null });
  direct = await loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny' });
});

after(async () => {
  ndif.close();
  await direct.close();
  await fab.close();
});

describe('trace', () => {
  it('deploys on demand, reads and swaps a layer, and returns tensors bit-identical to the runtime', async () => {
    const seen: StatusMessage[] = [];
    const out = await ndif.trace('gpt2-tiny', PROMPT, readAndSwap, { onMessage: (m) => seen.push(m) });
    const statuses = seen.map((m) => m.status);
    assert.deepEqual(statuses, [
      'RECEIVED',
      'PROVISIONING',
      'DEPLOYING',
      'QUEUED',
      'DISPATCHED',
      'RUNNING',
      'COMPLETED',
    ]);
    assert.ok(
      seen.every((m, i) => i === 0 || Number.parseInt(m.cursor, 10) > Number.parseInt(seen[i - 1]!.cursor, 10)),
      'cursors increase',
    );
    const want = await runDirect(readAndSwap.toString());
    for (const k of ['mlp', 'h', 'logits'] as const) {
      assert.ok(out[k] instanceof Tensor, `${k} is a Tensor`);
      assert.deepEqual(out[k].shape, want.value[k]!.shape);
      assert.equal(out[k].dtype, 'float32');
      assert.ok(bitsOf(out[k]).equals(bitsOf(want.value[k]!)), `${k}: same bits as the runtime called directly`);
    }
    assert.deepEqual(out.h.shape, [1, 7, 64]);
    assert.ok(
      out.mlp.data.some((x: number) => x !== 0),
      'the value read is the one before the swap',
    );
  });

  it('several invokes with their own blocks and params; log lines reach onLog with their stream', async () => {
    const logs: Array<{ stream: string; line: string }> = [];
    const values = await ndif.trace(
      'gpt2-tiny',
      [
        'Hello world',
        {
          input: [464, 412, 733],
          block: async (m: any, ctx: any, p: { layer: number }) => ({
            invoke: ctx.invoke,
            layer: p.layer,
            shape: (await m.transformer.h[p.layer].output).shape,
          }),
          params: { layer: 1 },
        },
        { input: 'no block here' },
      ],
      async (m: any, ctx: any) => {
        console.log(`invoke ${ctx.invoke} sees`, ctx.tokens.length, 'tokens');
        console.error('to stderr');
        return (await m.transformer.h[0].output).shape;
      },
      { onLog: (l) => logs.push({ stream: l.stream, line: l.line }) },
    );
    assert.equal(values.length, 3);
    assert.deepEqual(values[0], [1, 3, 64], 'invokes are padded to the longest (3 tokens)');
    assert.deepEqual(values[1], { invoke: 1, layer: 1, shape: [1, 3, 64] });
    assert.deepEqual(values[2], [1, 3, 64], 'an invoke without a block of its own runs the shared one');
    assert.deepEqual(
      logs
        .filter((l) => l.stream === 'stdout')
        .map((l) => l.line)
        .sort(),
      ['invoke 0 sees 2 tokens', 'invoke 2 sees 3 tokens'],
    );
    assert.equal(logs.filter((l) => l.stream === 'stderr').length, 2);
    const bare = await ndif.trace('gpt2-tiny', ['a', { input: 'b', block: async () => 'own' }]);
    assert.deepEqual(bare, [null, 'own'], 'with no shared block, an invoke without a block just runs the model');
  });

  it('generation: newTokens steps, the same tokens as the runtime', async () => {
    const block = async (m: any) => ({ last: (await m.step(2).output).slice(0, -1).argmax(-1) });
    const r = await ndif.execute('gpt2-tiny', PROMPT, block, { newTokens: 3 });
    const want = await runDirect(block.toString(), PROMPT, 3);
    assert.deepEqual(r.meta.generated, [want.run.invokes[0]!.generated]);
    assert.deepEqual((r.values[0] as { last: Tensor }).last.toArray(), want.value.last!.toArray());
    assert.equal(r.meta.steps, 3);
  });

  it("a block that throws: RemoteError with the block's own stack", async () => {
    const block = 'async (m) => {\n  const h = await m.transformer.h[0].output;\n  h.notAMethod();\n}';
    await assert.rejects(ndif.trace('gpt2-tiny', PROMPT, block), (e: unknown) => {
      assert.ok(e instanceof RemoteError, String(e));
      assert.equal(e.phase, 'execution');
      assert.equal(e.type, 'BlockError');
      assert.match(e.remoteMessage, /TypeError: h\.notAMethod is not a function/);
      assert.match(e.remoteStack ?? '', /block-0\.js:3:\d+/);
      assert.match(e.stack ?? '', /--- on the fabric ---/);
      return true;
    });
  });

  it('out of forward order: RemoteError OutOfOrder naming both points', async () => {
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, async (m: any) => {
        await m.transformer.h[1].output;
        return await m.transformer.h[0].mlp.output;
      }),
      (e: unknown) =>
        e instanceof RemoteError && e.type === 'OutOfOrder' && /transformer\.h\.0\.mlp/.test(e.remoteMessage),
    );
  });

  it('a malformed block is refused at submission with its line', async () => {
    await assert.rejects(ndif.trace('gpt2-tiny', PROMPT, 'async (m) => {\n  return m.(;\n}'), (e: unknown) => {
      assert.ok(e instanceof FabricHttpError);
      assert.equal(e.status, 400);
      assert.equal(e.code, 'BLOCK_SYNTAX_ERROR');
      assert.equal(e.details?.line, 2);
      return true;
    });
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, '42'),
      (e: unknown) =>
        e instanceof FabricHttpError &&
        e.code === 'BLOCK_SYNTAX_ERROR' &&
        /not a function expression/.test(e.remoteMessage),
    );
  });

  it('an unknown model is refused with the known keys', async () => {
    await assert.rejects(
      ndif.trace('gpt9', PROMPT, readAndSwap),
      (e: unknown) =>
        e instanceof FabricHttpError &&
        e.status === 404 &&
        e.code === 'API_UNKNOWN_MODEL' &&
        JSON.stringify(e.details).includes('gpt2-tiny'),
    );
  });

  it('progress: plain lines per status on a stream that is not a terminal', async () => {
    const lines: string[] = [];
    await ndif.trace('gpt2-tiny', PROMPT, async (m: any) => (await m.transformer.h[0].output).shape, {
      progress: { write: (s: string) => lines.push(s) },
      requestId: 'progress-1',
    });
    const text = lines.join('');
    assert.match(text, /^\[ndif progress] RECEIVED · /m);
    assert.match(text, /^\[ndif progress] COMPLETED · /m);
    assert.ok(!text.includes('\x1b'));
  });
});

describe('cancel, wait limits, non-blocking', () => {
  const slow = async () => {
    await new Promise((r) => setTimeout(r, 3000));
    return 1;
  };

  it('an AbortSignal cancels the request on the fabric: CancelledError, and the fabric shows CANCELLED', async () => {
    const ac = new AbortController();
    const running = new Promise<void>((r) => setTimeout(r, 5000));
    let id = '';
    const p = ndif.execute('gpt2-tiny', PROMPT, slow, {
      signal: ac.signal,
      onStatus: (u) => {
        id = u.requestId;
        if (u.status === 'RUNNING') ac.abort();
      },
    });
    await assert.rejects(
      Promise.race([p, running.then(() => 'too slow')]),
      (e: unknown) => e instanceof CancelledError && /by operator local/.test(e.message),
      'auth off: the caller is `local`, with the operator tag',
    );
    const info = await ndif.request(id).status();
    assert.equal(info.status, 'CANCELLED');
    assert.equal(info.reply.cancelled?.by, 'operator');
    const pre = new AbortController();
    pre.abort();
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, slow, { signal: pre.signal }),
      (e: unknown) => e instanceof CancelledError && /before submitting/.test(e.message),
    );
  });

  it('waitMs gives up on the client only; the request goes on and can be cancelled', async () => {
    let id = '';
    await assert.rejects(
      ndif.trace('gpt2-tiny', PROMPT, slow, { waitMs: 300, onStatus: (u) => (id = u.requestId) }),
      ClientTimeoutError,
    );
    const h = ndif.request(id);
    assert.notEqual((await h.status()).status, 'CANCELLED');
    assert.equal(await h.cancel(), true);
    const done = await h.wait({ waitMs: 10_000 });
    assert.equal(done.status, 'CANCELLED');
    await assert.rejects(h.result(), CancelledError);
  });

  it('submit returns a handle: status, then the result by polling', async () => {
    const h = await ndif.submit('gpt2-tiny', PROMPT, async (m: any) => ({ h: await m.transformer.h[1].output }));
    const first = await h.status();
    assert.equal(first.requestId, h.requestId);
    assert.ok(['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING', 'COMPLETED'].includes(first.status), first.status);
    const v = await h.result({ waitMs: 20_000 });
    assert.ok(v.h instanceof Tensor);
    assert.deepEqual(v.h.shape, [1, 7, 64]);
    const info = await h.status();
    assert.equal(info.status, 'COMPLETED');
    assert.deepEqual(info.reply.statuses.map((s) => s.status).slice(-3), ['DISPATCHED', 'RUNNING', 'COMPLETED']);
    const list = await ndif.request(h.requestId).result();
    assert.ok(Array.isArray(list) && list[0].h instanceof Tensor, 'a handle from an id gives the list of values');
  });

  it('a failed request through a handle: RemoteError', async () => {
    const h = await ndif.submit('gpt2-tiny', PROMPT, 'async () => { throw new RangeError("nope"); }');
    await assert.rejects(
      h.result({ waitMs: 20_000 }),
      (e: unknown) => e instanceof RemoteError && e.remoteMessage === 'RangeError: nope',
    );
  });
});

describe('transport of results and statuses', () => {
  it('a result comes as a binary frame after its COMPLETED message (no base64), checked and bit-identical', async () => {
    let completed: StatusMessage | undefined;
    const out = await ndif.trace('gpt2-tiny', PROMPT, readAndSwap, {
      onMessage: (m) => {
        if (m.status === 'COMPLETED') completed = m;
      },
    });
    assert.equal(completed?.binary, true);
    assert.equal(completed?.inline, undefined);
    assert.equal(completed?.url, undefined);
    assert.equal(completed?.resultBytes?.byteLength, completed?.bytes);
    const want = await runDirect(readAndSwap.toString());
    assert.ok(bitsOf(out.logits).equals(bitsOf(want.value.logits!)));
  });

  it('a binary result whose bytes do not match its sha256 is refused (ProtocolError), not decoded', async () => {
    const requestId = `tamper-${Date.now()}`;
    await ndif.trace('gpt2-tiny', PROMPT, readAndSwap, { requestId });
    const ref = await ndif.http.json<{ result: { bytes: number } }>('GET', `/requests/${requestId}`);
    const tampered = tamperStoredBlob(
      join(fab.tmp, 'blobs'),
      (_ref, bytes) => bytes.byteLength === ref.result.bytes && bytes.includes('NDIFRES1'),
      (bytes) => {
        const copy = Buffer.from(bytes);
        copy[copy.length - 1]! ^= 0xff;
        return copy;
      },
    );
    assert.ok(tampered, 'the result blob is stored');
    // The same request again (same id and body): the subscription replays its COMPLETED with the tampered bytes.
    await assert.rejects(ndif.trace('gpt2-tiny', PROMPT, readAndSwap, { requestId }), (e: Error) => {
      assert.ok(e instanceof ProtocolError, String(e));
      assert.match(e.message, /does not match its sha256/);
      return true;
    });
  });

  it('a server without binary results (or a result over its binary limit) inlines base64 as before', async () => {
    const url = await fab.serveAlso({ wsBinaryResultMaxBytes: 1024 });
    const small = new Fabric({ url, progress: false });
    try {
      let completed: StatusMessage | undefined;
      const out = await small.trace('gpt2-tiny', PROMPT, readAndSwap, {
        onMessage: (m) => {
          if (m.status === 'COMPLETED') completed = m;
        },
      });
      assert.equal(completed?.binary, undefined);
      assert.equal(typeof completed?.inline, 'string');
      const want = await runDirect(readAndSwap.toString());
      assert.ok(bitsOf(out.logits).equals(bitsOf(want.value.logits!)));
    } finally {
      small.close();
    }
  });

  it('a result over the inline and binary limits comes by its signed URL, transparently', async () => {
    const url = await fab.serveAlso({ inlineResultMaxBytes: 1024, wsBinaryResultMaxBytes: 1024 });
    const small = new Fabric({ url, progress: false });
    try {
      let completed: StatusMessage | undefined;
      const out = await small.trace('gpt2-tiny', PROMPT, readAndSwap, {
        onMessage: (m) => {
          if (m.status === 'COMPLETED') completed = m;
        },
      });
      assert.equal(completed?.inline, undefined);
      assert.match(completed?.url ?? '', /\/result\?token=/);
      const want = await runDirect(readAndSwap.toString());
      assert.ok(bitsOf(out.logits).equals(bitsOf(want.value.logits!)));
    } finally {
      small.close();
    }
  });

  it("a result over the agent's stream size (4 MiB here) is downloaded while written (RESULT_WRITING), or, asked not to, after", async () => {
    const big = 'async (m, ctx) => ctx.Tensor.full([1048576 + 7], 0.5)';
    for (const resultStream of [true, false]) {
      const client = new Fabric({ url: fab.url, progress: false, resultStream });
      try {
        const seen: StatusMessage[] = [];
        const out: Tensor = await client.trace('gpt2-tiny', PROMPT, big, { onMessage: (m) => seen.push(m) });
        assert.deepEqual(out.shape, [1048576 + 7]);
        assert.ok(out.data.every((x) => x === 0.5));
        const writing = seen.findIndex((m) => m.status === 'RESULT_WRITING');
        const completed = seen.find((m) => m.status === 'COMPLETED')!;
        if (resultStream) {
          assert.ok(writing >= 0 && writing < seen.indexOf(completed), seen.map((m) => m.status).join(' '));
          assert.match(seen[writing]!.url ?? '', /\/result\?token=/);
          assert.equal(completed.streamed, true);
          assert.equal(completed.resultBytes, undefined, 'no binary frame: the result came by its early download');
        } else {
          assert.equal(writing, -1);
          assert.equal(completed.binary, true);
          assert.equal(completed.resultBytes?.byteLength, completed.bytes);
        }
        // Read by nothing as it comes: the submission waits, its wait ends when the result is being written, and the
        // subscription's replay starts the download.
        const quiet: Tensor = await client.trace('gpt2-tiny', PROMPT, big);
        assert.deepEqual(quiet.shape, [1048576 + 7]);
        assert.ok(quiet.data.every((x) => x === 0.5));
      } finally {
        client.close();
      }
    }
  });

  it('a dropped websocket reconnects from the last cursor: nothing missed, nothing twice', async () => {
    const seen: string[] = [];
    const p = ndif.trace(
      'gpt2-tiny',
      PROMPT,
      async (m: any) => {
        console.log('before');
        await new Promise((r) => setTimeout(r, 800));
        console.log('after');
        return (await m.transformer.h[0].output).shape;
      },
      {
        onMessage: (m) => {
          seen.push(m.status === 'LOG' ? `LOG ${m.line}` : m.status);
          // Cut the TCP connection under the client once the block runs.
          if (m.status === 'LOG' && m.line === 'before')
            (ndif as unknown as { socket: { tcp: { destroy(): void } } }).socket.tcp.destroy();
        },
      },
    );
    assert.deepEqual(await p, [1, 7, 64]);
    assert.deepEqual(seen, ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING', 'LOG before', 'LOG after', 'COMPLETED']);
  });

  it('a websocket that cannot come back: the trace reads its outcome by polling', async () => {
    const fragile = new Fabric({ url: fab.url, progress: false, onLog: null, reconnectAttempts: 0 });
    try {
      const p = fragile.trace(
        'gpt2-tiny',
        PROMPT,
        async (m: any) => {
          await new Promise((r) => setTimeout(r, 400));
          return (await m.transformer.h[0].output).shape;
        },
        {
          onStatus: (u) =>
            u.status === 'RUNNING' &&
            (fragile as unknown as { socket: { tcp: { destroy(): void } } }).socket.tcp.destroy(),
        },
      );
      assert.deepEqual(await p, [1, 7, 64]);
    } finally {
      fragile.close();
    }
  });

  it('concurrent traces share one websocket', async () => {
    const outs = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        ndif.trace('gpt2-tiny', `prompt number ${i}`, async (m: any) => (await m.transformer.h[1].output).shape),
      ),
    );
    assert.deepEqual(
      outs.map((s) => s[2]),
      [64, 64, 64, 64],
    );
  });
});

describe('version handshake', () => {
  it('a client of another protocol major is refused by the SDK before it sends anything', async () => {
    const other = new Fabric({ url: fab.url, progress: false, protocolVersion: '2.0' });
    await assert.rejects(other.trace('gpt2-tiny', PROMPT, readAndSwap), (e: unknown) => {
      assert.ok(e instanceof ProtocolMismatchError);
      assert.equal(e.serverVersion, '1.0');
      assert.equal(e.clientVersion, '2.0');
      assert.match(e.message, /speaks protocol 1\.0, this client speaks protocol 2\.0/);
      return true;
    });
    const v = await ndif.version();
    assert.equal(v.protocol, '1.0');
    assert.ok(v.capabilities.includes('ws-status'));
  });

  it('without the SDK check, the fabric refuses the header and the SDK says so the same way', async () => {
    const other = new Fabric({ url: fab.url, progress: false, protocolVersion: '2.0', checkVersion: false });
    await assert.rejects(
      other.submit('gpt2-tiny', PROMPT, readAndSwap),
      (e: unknown) =>
        e instanceof ProtocolMismatchError && e.serverVersion === '1.0' && /refused POST \/requests/.test(e.message),
    );
    await assert.rejects(other.trace('gpt2-tiny', PROMPT, readAndSwap), ProtocolMismatchError);
    other.close();
  });
});
