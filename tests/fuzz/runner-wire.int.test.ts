// The sandbox runner's whole wire conversation from a hostile runner, seeded. protocol/frames.ts's own fuzz
// (tests/sandbox/frames.unit.test.ts) checks the decoder frame by frame; this one drives the model host
// (HostedModel.run over gpt2-tiny) through the agent's end of a real Unix socket (sandbox/socket-channel.ts, the
// channel a SandboxSession reads) while the other end — the "runner" — answers START with a fuzzed script: well-formed
// frames of every kind (progress REPORTs too) with wrong invokes, addresses, shapes, dtypes, steps and orders, frames
// of the other direction, sandbox-only frames, random bytes, corrupted and truncated frames, early closes. BACKWARD
// frames (well-formed and damaged seeds) and gradient WAITs and SWAPs, with the forward pass recorded for a backward or
// not. 2,500 conversations (10,500 with NDIF_FUZZ=long, tests/fuzz/runs.ts). Properties: the run always settles; a
// failure is an InterventionError with a BlockError (ProtocolError for what is not the protocol, else one of the host's
// own types or the runner's EXCEPTION type), never another exception; a run that succeeds returns exactly what the
// runner's first END of each invoke said; LOG lines sent before a byte-level corruption all arrive, and the corruption
// is a ProtocolError naming a FRAME_ code. Then a sample through real runner processes (the block writes the fuzzed
// bytes on its own socket, fd 3).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { InterventionError, type HostedModel, type LogLine } from '../../gpu-agent/runtime/index.js';
import { encodeRunnerToAgent, FrameDecoder } from '../../protocol/frames.js';
import type { RunnerToAgent } from '../../protocol/frames.js';
import type {
  BlockChannel,
  BlockError,
  BlockToHost,
  Dtype,
  GradSeed,
  SavedTree,
  TensorPayload,
} from '../../protocol/interleave.js';
import { agentEnd } from '../../sandbox/socket-channel.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { tinyModel, tinySandbox } from '../sandbox/helpers.js';
import { fuzzRuns, share } from './runs.js';

const SEED = 20_251_206;
const LONG_RUNS = 10_500;
const RUNS = fuzzRuns(2_500, LONG_RUNS);
const REAL_RUNNERS = 12;
const TOKENS = [464, 2068, 7586];
const D = 64;

/** Error types the host itself raises (gpu-agent/runtime); anything else must come from the runner's EXCEPTION. */
const HOST_TYPES = new Set([
  'ProtocolError',
  'OutOfOrder',
  'NotProvided',
  'UnknownModule',
  'NotObservable',
  'NotSkippable',
  'ShapeMismatch',
  'DtypeMismatch',
  'NonFinite',
  'SharedTensor',
  'Timeout',
  'InvalidResult',
  'NotDifferentiable',
  'NoBackward',
  'BackwardError',
  'NotCallable',
  'CallFailed',
  'BarrierError',
  'CacheError',
]);

let hm: HostedModel;
let dir: string;
let server: Server;
const accepted: Array<(s: Socket) => void> = [];

before(async () => {
  hm = await tinyModel();
  dir = mkdtempSync(join(tmpdir(), 'ndif-wire-'));
  server = createServer((s) => accepted.shift()?.(s));
  await new Promise<void>((r) => server.listen(join(dir, 'w.sock'), r));
});
after(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

/** A connected pair: the agent's end (accepted) and the runner's (connected). */
async function pair(): Promise<{ agent: Socket; runner: Socket }> {
  const agent = new Promise<Socket>((r) => accepted.push(r));
  const runner = connect(join(dir, 'w.sock'));
  await new Promise<void>((r) => runner.once('connect', () => r()));
  return { agent: await agent, runner };
}

// ------------------------------------------------------------------ the hostile runner's script

type Action =
  | { kind: 'frame'; msg: RunnerToAgent }
  | { kind: 'bytes'; data: Uint8Array }
  | { kind: 'corrupt'; msg: RunnerToAgent; at: number; xor: number }
  | { kind: 'truncate'; msg: RunnerToAgent; keep: number }
  | { kind: 'wait' };

const DTYPE_BYTES: Record<Dtype, number> = { float32: 4, float16: 2, int64: 8, int32: 4, int8: 1, uint8: 1, bool: 1 };
const ADDRS = [
  'transformer.h.0.output.0',
  'transformer.h.1.output.0',
  'transformer.h.0.input.0',
  'transformer.h.0.mlp.output.0',
  'transformer.wte.output.0',
  'lm_head.output.0',
  'transformer.h.1.output.1',
  'transformer.h.0.output.5',
  'transformer.h.9.output.0',
  'transformer.h.0.output',
  'transformer.h.0.outputs.0',
  '',
  'h.0.output.0',
  'transformer.h.0.output.-1',
  'transformer..output.0',
  // gradient addresses (WAIT and SWAP of `<addr>.grad`)
  'transformer.h.1.output.0.grad',
  'transformer.h.0.output.0.grad',
  'transformer.wte.output.0.grad',
  'input.0.grad',
  'output.0.grad',
  'transformer.h.0.output.1.grad',
  'nope.output.0.grad',
  '.grad',
  // barriers, caches and calls (a call is a CALL, not a WAIT)
  '@barrier:0:1:x',
  '@barrier:0:2:x',
  '@barrier:1:2:x',
  '@barrier:0:3:x',
  '@barrier:0:0:x',
  '@cache:1',
  '@cache:2',
  '@cache:99',
  '@call:1',
  '@nope',
];
const POINT_KEYS = [
  'transformer.h.0.output',
  'transformer.h.1.output',
  'transformer.h.0.input',
  'output',
  'input',
  'transformer.h.output',
  'nope.output',
  'transformer.h.0.mlp.c_fc.output',
  '',
];
const text = fc.string({ unit: 'binary', maxLength: 24 });
const invoke = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(0, 1) },
  { weight: 1, arbitrary: fc.constantFrom(2, 99, 0xffff_ffff) },
);
const addr = fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...ADDRS) }, { weight: 1, arbitrary: text });

const tensorOf = (dtype: Dtype, shape: number[], fill: (i: number) => number = () => 0.5): TensorPayload => {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Uint8Array(n * DTYPE_BYTES[dtype]);
  if (dtype === 'float32') {
    const f = new Float32Array(data.buffer);
    for (let i = 0; i < n; i++) f[i] = fill(i);
  }
  return { dtype, shape, data };
};
const tensor: fc.Arbitrary<TensorPayload> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(tensorOf('float32', [1, TOKENS.length, D])) },
  { weight: 1, arbitrary: fc.constant(tensorOf('float32', [1, TOKENS.length, D], (i) => (i === 7 ? Number.NaN : 0))) },
  {
    weight: 2,
    arbitrary: fc
      .record({
        dtype: fc.constantFrom<Dtype>('float32', 'float16', 'int64', 'int32', 'int8', 'uint8', 'bool'),
        shape: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
      })
      .map(({ dtype, shape }) => tensorOf(dtype, shape)),
  },
);
const tensors = fc.array(tensor, { maxLength: 2 });
const tree = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constant({ $tensor: 0 }),
  fc.constant([{ $tensor: 0 }, { h: { $tensor: 1 } }]),
);
const savedTree: fc.Arbitrary<SavedTree> = fc.record({ tree, tensors });
const blockError: fc.Arbitrary<BlockError> = fc.record({
  phase: fc.constantFrom('deserialize', 'execute', 'protocol' as const),
  type: fc.oneof(fc.constantFrom('BlockError', 'OutOfOrder', 'RunnerSaysNo'), text),
  message: text,
});

const LOGITS = [1, TOKENS.length, 50257];
const offsets = (xs: number[]): TensorPayload => ({
  dtype: 'int64',
  shape: [xs.length],
  data: new Uint8Array(BigInt64Array.from(xs.map(BigInt)).buffer),
});
const seed: fc.Arbitrary<GradSeed> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ addr, index: fc.constantFrom(0, 0, 1, 7), grad: tensor }) },
  // a well-formed sparse seed of two logits, and damaged ones (offsets outside, wrong counts, another dtype)
  {
    weight: 2,
    arbitrary: fc.constantFrom<GradSeed>(
      {
        addr: 'output.0',
        index: 0,
        shape: LOGITS,
        at: offsets([2 * 50257 + 7, 2 * 50257 + 11]),
        grad: tensorOf('float32', [2], (i) => (i === 0 ? 1 : -1)),
      },
      { addr: 'output.0', index: 0, shape: LOGITS, at: offsets([-1, 3]), grad: tensorOf('float32', [2]) },
      { addr: 'output.0', index: 0, shape: LOGITS, at: offsets([1]), grad: tensorOf('float32', [2]) },
      { addr: 'output.0', index: 0, shape: [1, 2], at: tensorOf('float32', [2]), grad: tensorOf('float32', [2]) },
    ),
  },
);

const message: fc.Arbitrary<RunnerToAgent> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('BACKWARD' as const),
      invoke,
      step: fc.constantFrom(0, 0, 1, 7),
      seeds: fc.array(seed, { maxLength: 3 }),
    }),
  },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('WAIT' as const), invoke, addr }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('SWAP' as const), invoke, addr, values: tensors }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('SKIP' as const),
      invoke,
      path: fc.oneof(fc.constantFrom('transformer.h.0', 'transformer.h.0.mlp', 'transformer.h', '', 'nope'), text),
      step: fc.constantFrom(0, 1, 7),
      values: tensors,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('STOP' as const), invoke }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('CALL' as const),
      invoke,
      id: fc.constantFrom(1, 2, 7),
      path: fc.oneof(
        fc.constantFrom(
          'lm_head',
          'transformer.ln_f',
          'transformer.h.0.attn',
          'transformer.h',
          '',
          'nope',
          'transformer.h[1].mlp',
        ),
        text,
      ),
      values: tensors,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('CACHE' as const),
      invoke,
      id: fc.constantFrom(1, 2, 99),
      step: fc.constantFrom(0, 0, 1, 7),
      points: fc.array(fc.oneof(fc.constantFrom(...POINT_KEYS), text), { maxLength: 3 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('LOG' as const),
      invoke,
      stream: fc.constantFrom('stdout' as const, 'stderr' as const),
      line: text,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('REPORT' as const),
      invoke,
      value: fc.oneof(fc.constantFrom('0.5', '{"loss":1.25,"acc":0.5}', '"low"', 'NaN', '{}', '[1]'), text),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('END' as const), invoke, result: savedTree }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('EXCEPTION' as const), invoke, error: blockError }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('READY' as const),
      version: fc.constantFrom(1, 2),
      pid: fc.nat(),
      startupMs: fc.double({ noNaN: true, noDefaultInfinity: true }),
      rssBytes: fc.nat(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('FAILED' as const), code: text, message: text }) },
);

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 12, arbitrary: message.map((msg): Action => ({ kind: 'frame', msg })) },
  { weight: 3, arbitrary: fc.constant<Action>({ kind: 'wait' }) },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ minLength: 1, maxLength: 24 }).map((data): Action => ({ kind: 'bytes', data })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(message, fc.double({ min: 0, max: 0.999, noNaN: true }), fc.integer({ min: 1, max: 255 }))
      .map(([msg, at, xor]): Action => ({ kind: 'corrupt', msg, at, xor })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(message, fc.double({ min: 0, max: 0.999, noNaN: true }))
      .map(([msg, keep]): Action => ({ kind: 'truncate', msg, keep })),
  },
);

const conversation = fc.record({
  invokes: fc.constantFrom(1, 2),
  /** Whether the blocks' source names `backward` (the host then records the forward pass for one). */
  records: fc.boolean(),
  steps: fc.constantFrom(1, 1, 2),
  script: fc.array(action, { minLength: 1, maxLength: 12 }),
});

interface Outcome {
  result?: Awaited<ReturnType<HostedModel['run']>>;
  error?: unknown;
  logs: LogLine[];
}

/** Plays `script` as the runner once the host's START arrived; ends the socket afterwards (a truncation ends it there). */
async function converse(c: { invokes: number; records: boolean; steps: number; script: Action[] }): Promise<Outcome> {
  const { agent, runner } = await pair();
  const fromHost: unknown[] = [];
  let hostSpoke: () => void = () => undefined;
  const decoder = new FrameDecoder('agent-to-runner');
  runner.on('data', (chunk: Buffer) => {
    try {
      fromHost.push(...decoder.push(chunk));
    } catch (e) {
      fromHost.push(e);
    }
    hostSpoke();
  });
  runner.on('error', () => undefined);
  const nextFromHost = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      hostSpoke = () => {
        clearTimeout(t);
        resolve();
      };
    });
  const play = (async () => {
    while (fromHost.length === 0) await nextFromHost(1000);
    for (const a of c.script) {
      if (runner.destroyed) return;
      if (a.kind === 'wait') {
        await nextFromHost(5);
        continue;
      }
      if (a.kind === 'bytes') runner.write(a.data);
      else if (a.kind === 'frame') runner.write(encodeRunnerToAgent(a.msg));
      else if (a.kind === 'corrupt') {
        const b = Buffer.from(encodeRunnerToAgent(a.msg));
        const i = Math.floor(a.at * b.length);
        b[i] = b[i]! ^ a.xor;
        runner.write(b);
      } else {
        const b = encodeRunnerToAgent(a.msg);
        runner.end(b.subarray(0, Math.floor(a.keep * b.length)));
        return;
      }
      await new Promise((r) => setImmediate(r));
    }
    runner.end();
  })();
  const logs: LogLine[] = [];
  const socketChannel = agentEnd(agent);
  // What SandboxSession hands the host: the socket channel as the host↔blocks conversation, where a send to a
  // runner whose socket is gone is dropped (RunnerProcess.trySend) and the failure comes out of receive().
  const channel: BlockChannel = {
    send: (m) => {
      try {
        socketChannel.send(m);
      } catch {
        // the runner is gone
      }
    },
    receive: () => socketChannel.receive() as Promise<BlockToHost>,
    close: () => socketChannel.close(),
  };
  const out: Outcome = { logs };
  try {
    out.result = await hm.run(
      {
        invokes: Array.from({ length: c.invokes }, () => ({
          tokens: TOKENS,
          block: c.records ? "async (m) => 'backward'" : 'async (m) => 0',
        })),
        newTokens: c.steps - 1,
        timeoutMs: 5000,
        onLog: (l) => logs.push(l),
      },
      () => channel,
    );
  } catch (e) {
    out.error = e;
  }
  await play;
  runner.destroy();
  agent.destroy();
  return out;
}

/** Byte-level damage before the conversation could have ended: the host must see a ProtocolError about a frame. */
const damaging = (a: Action) => a.kind === 'bytes' || a.kind === 'truncate';

describe('runner wire protocol from a hostile runner', () => {
  it(`${RUNS} seeded conversations: the host settles, reports a BlockError (ProtocolError for bad frames), never misreads`, async (t) => {
    const started = Date.now();
    const tally = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(conversation, async (c) => {
        const o = await converse(c);
        const what = () =>
          `${JSON.stringify(c, (_k, v) => (v instanceof Uint8Array ? `<${v.length} bytes>` : v)).slice(0, 600)} → ${o.error instanceof Error ? `${o.error.name}: ${o.error.message}` : 'ok'}`;
        const sentExceptions = new Set(
          c.script.flatMap((a) => (a.kind === 'frame' && a.msg.kind === 'EXCEPTION' ? [a.msg.error.type] : [])),
        );
        if (o.error !== undefined) {
          assert.ok(o.error instanceof InterventionError, `not an InterventionError: ${what()}`);
          const be = o.error.blockError;
          assert.ok(['deserialize', 'execute', 'protocol'].includes(be.phase), what());
          assert.ok(HOST_TYPES.has(be.type) || sentExceptions.has(be.type), `type ${be.type}: ${what()}`);
          const kind = HOST_TYPES.has(be.type) ? be.type : "the runner's own EXCEPTION";
          tally.set(kind, (tally.get(kind) ?? 0) + 1);
        } else {
          // Success: every invoke's result is what the runner's first END for it said, nothing else.
          // An END corrupted in its tensor bytes is still a well-formed END (frames carry no checksum): an invoke whose
          // first END was such a frame is not compared.
          const firstEnd = new Map<number, SavedTree | 'corrupted'>();
          for (const a of c.script)
            if ((a.kind === 'frame' || a.kind === 'corrupt') && a.msg.kind === 'END' && !firstEnd.has(a.msg.invoke))
              firstEnd.set(a.msg.invoke, a.kind === 'corrupt' ? 'corrupted' : a.msg.result);
          const r = o.result!;
          assert.equal(r.invokes.length, c.invokes);
          r.invokes.forEach((inv, i) => {
            const sent = firstEnd.get(i);
            if (sent === 'corrupted') return;
            assert.ok(sent !== undefined, `invoke ${i} succeeded without an END: ${what()}`);
            assert.deepEqual(inv.result.tree, sent.tree, what());
            assert.equal(inv.result.tensors.length, sent.tensors.length, what());
            inv.result.tensors.forEach((tt, k) => {
              assert.ok(Buffer.from(tt.data).equals(Buffer.from(sent.tensors[k]!.data)), what());
            });
          });
          tally.set('ok', (tally.get('ok') ?? 0) + 1);
        }
        // No line is taken for an invoke the request does not have.
        assert.ok(
          o.logs.every((l) => l.invoke >= 0 && l.invoke < c.invokes),
          `a LOG line for a missing invoke was kept: ${what()}`,
        );
        // LOG frames before the first byte-level damage all arrive, in order, and nothing else does (a corrupted
        // frame may still be a well-formed frame of another content: frames carry no checksum, the socket is reliable).
        const firstDamage = c.script.findIndex(damaging);
        if (
          firstDamage >= 0 &&
          c.script
            .slice(0, firstDamage)
            .every((a) => a.kind === 'wait' || (a.kind === 'frame' && a.msg.kind === 'LOG' && a.msg.invoke < c.invokes))
        ) {
          const sent = c.script
            .slice(0, firstDamage)
            .flatMap((a) => (a.kind === 'frame' && a.msg.kind === 'LOG' ? [a.msg.line] : []));
          assert.deepEqual(
            o.logs.map((l) => l.line),
            sent,
            what(),
          );
          assert.ok(o.error instanceof InterventionError && o.error.blockError.type === 'ProtocolError', what());
          const d = c.script[firstDamage]!;
          if (d.kind === 'bytes' || d.kind === 'truncate')
            assert.match(o.error.blockError.message, /FRAME_|channel to the blocks broke/, what());
          tally.set('damage-after-logs', (tally.get('damage-after-logs') ?? 0) + 1);
        }
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true, includeErrorInReport: true },
    );
    t.diagnostic(`${RUNS} conversations in ${Date.now() - started} ms: ${JSON.stringify(Object.fromEntries(tally))}`);
    assert.ok(
      (tally.get('ProtocolError') ?? 0) > share(1000, LONG_RUNS, RUNS) &&
        (tally.get('damage-after-logs') ?? 0) > share(100, LONG_RUNS, RUNS),
    );
  });

  describe('through real runner processes', () => {
    let sb: Sandbox;
    before(async () => {
      ({ sb } = await tinySandbox({ poolSize: 1 }));
    });
    after(async () => {
      await sb?.close();
    });

    it(`${REAL_RUNNERS} runners whose block writes fuzzed bytes on its own socket: a ProtocolError, and the next runner works`, async () => {
      const bytes = fc.oneof(
        fc.uint8Array({ minLength: 1, maxLength: 40 }),
        message
          .map((m) => new Uint8Array(encodeRunnerToAgent(m)))
          .chain((b) => fc.integer({ min: 1, max: b.length }).map((n) => b.subarray(0, n))),
      );
      await fc.assert(
        fc.asyncProperty(bytes, async (b) => {
          const block = `async (m) => { process.getBuiltinModule('fs').writeSync(3, Buffer.from('${Buffer.from(b).toString('base64')}', 'base64')); await m.transformer.h[0].output; return 1; }`;
          try {
            // A prefix of a frame makes the host wait for the rest of it: the deadline ends those.
            const r = await hm.run({ invokes: [{ tokens: TOKENS, block }], timeoutMs: 1500 }, sb.opener('gpt2-tiny'));
            // Bytes that happen to be a whole, acceptable frame (a LOG line) leave the request to finish.
            assert.equal(r.invokes[0]!.result.tree, 1);
          } catch (e) {
            assert.ok(e instanceof InterventionError, String(e));
            assert.ok(
              HOST_TYPES.has(e.blockError.type) || e.blockError.type === 'SandboxCrashed',
              `${e.blockError.type}: ${e.blockError.message}`,
            );
          }
        }),
        { seed: SEED + 1, numRuns: REAL_RUNNERS, endOnFailure: true },
      );
      const r = await hm.run(
        {
          invokes: [{ tokens: TOKENS, block: 'async (m) => (await m.transformer.h[0].output).shape' }],
          timeoutMs: 10_000,
        },
        sb.opener('gpt2-tiny'),
      );
      assert.deepEqual(r.invokes[0]!.result.tree, [1, 3, 64]);
    });
  });
});
