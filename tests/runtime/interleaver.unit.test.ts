// The interleaving protocol's rules on the host side (gpu-agent/runtime/interleave/), driven with a fake forward pass
// instead of onnxruntime sessions: a real graph analysis and address table of a hand-built graph, whose nodes the
// fake computes in plain JavaScript (Cast: ids to float32; Add: +1), and scripted blocks on the other end of an
// in-process channel. Every rule a block can meet — VALUE, SWAP, SKIP, END, OutOfOrder, NotProvided, invokes served
// in index order at each point, barriers, caches, sessions of traces — without loading a model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type {
  BlockChannel,
  BlockToHost,
  HostToBlock,
  SavedTree,
  StartRequest,
  TensorPayload,
} from '../../protocol/interleave.js';
import { stepAddr } from '../../protocol/interleave.js';
import { barrierAddr, cacheAddr } from '../../protocol/extra-addrs.js';
import { channelPair } from '../../gpu-agent/block/host/in-process.js';
import type { GraphProto, NodeProto } from '../../gpu-agent/runtime/onnx/types.js';
import { analyzeGraph } from '../../gpu-agent/runtime/graph/model-graph.js';
import type { ModelGraph, ModuleNode } from '../../gpu-agent/runtime/graph/model-graph.js';
import { buildAddressTable } from '../../gpu-agent/runtime/graph/addresses.js';
import { OrtTensorCtor } from '../../gpu-agent/runtime/ort/session.js';
import type { OrtTensor } from '../../gpu-agent/runtime/ort/session.js';
import type { SegmentCache } from '../../gpu-agent/runtime/segments/segment-cache.js';
import type { PassHooks } from '../../gpu-agent/runtime/interleave/forward-pass.js';
import type { ForwardRun, HostContext, TraceRun } from '../../gpu-agent/runtime/interleave/host-context.js';
import { runRequest, runTraces } from '../../gpu-agent/runtime/interleave/trace-session.js';
import { InterventionError } from '../../gpu-agent/runtime/errors.js';
import { NO_CACHE } from '../../gpu-agent/runtime/generation/kv-layout.js';

// input_ids → embed (Cast) → h.0 (+1) → h.1 (+1, inner +1, +1) → head (+1) → logits
const node = (name: string, op: string, input: string[], output: string[]): NodeProto => ({
  name,
  op_type: op,
  input,
  output,
});
const GRAPH: GraphProto = {
  input: [{ name: 'input_ids' }],
  output: [{ name: 'logits' }],
  initializer: [],
  node: [
    node('/embed/Cast', 'Cast', ['input_ids'], ['e']),
    node('/h.0/Add', 'Add', ['e'], ['h0']),
    node('/h.1/Add', 'Add', ['h0'], ['h1']),
    node('/h.1/inner/Add', 'Add', ['h1'], ['h1b']),
    node('/h.1/Add_1', 'Add', ['h1b'], ['h1c']),
    node('/head/Add', 'Add', ['h1c'], ['logits']),
  ],
};

/** Computes the graph's nodes in JavaScript; a module every invoke skips takes the outputs it is given. */
class FakePass implements ForwardRun {
  pos = 0;
  readonly table: Map<string, OrtTensor>;
  readonly aliases = [];
  private readonly owned = new WeakSet<OrtTensor>();

  constructor(
    private readonly g: ModelGraph,
    feeds: Record<string, OrtTensor>,
    private readonly hooks: PassHooks,
  ) {
    this.table = new Map(Object.entries(feeds));
  }

  get done(): boolean {
    return this.pos >= this.g.nodes.length;
  }

  async runTo(cut: number, skipped: ModuleNode[], outputs: (m: ModuleNode) => Map<string, OrtTensor>): Promise<void> {
    while (this.pos < cut) {
      const m = skipped.find((s) => s.start === this.pos);
      if (m) {
        for (const [k, v] of outputs(m)) this.table.set(k, v);
        this.pos = m.end;
        continue;
      }
      const n = this.g.nodes[this.pos]!;
      const x = this.table.get(n.input![0]!)!;
      const data =
        n.op_type === 'Cast'
          ? Float32Array.from(x.data as BigInt64Array, Number)
          : (x.data as Float32Array).map((v) => v + 1);
      this.table.set(n.output![0]!, new OrtTensorCtor('float32', data, [...x.dims]));
      this.pos++;
    }
    this.hooks.ran?.(this.pos);
  }

  own(t: OrtTensor): OrtTensor {
    this.owned.add(t);
    return t;
  }

  isOwned(t: OrtTensor): boolean {
    return this.owned.has(t);
  }
}

function fakeContext(): HostContext {
  const graph = analyzeGraph(GRAPH);
  return {
    graph,
    addresses: buildAddressTable(graph),
    // Read only for its compile statistics: the fake pass compiles nothing.
    cache: { getStats: () => ({ compileMs: 0, compiled: 0 }) } as unknown as SegmentCache,
    startPass: (feeds, _timings, _record, hooks) => new FakePass(graph, feeds, hooks),
    layerCuts: [],
    inputs: { names: ['input_ids'], past: [], bias: null },
    padding: 'left',
    logitsName: 'logits',
    batched: () => true,
    expected: (_t, rows, seq) => ({ dtype: 'float32', shape: [rows, seq] }),
    padTokenId: 0,
    kv: NO_CACHE('no generation here'),
    eosTokenIds: [],
    parameters: new Map(),
    parameterValue: () => {
      throw new Error('the fake graph has no parameters');
    },
    gradients: () => {
      throw new Error('these blocks take no gradients');
    },
  };
}

const f32 = (values: number[], shape = [1, values.length]): TensorPayload => ({
  dtype: 'float32',
  shape,
  data: new Uint8Array(Float32Array.from(values).buffer),
});
const numbers = (p: TensorPayload): number[] =>
  Array.from(new Float32Array(p.data.buffer.slice(p.data.byteOffset, p.data.byteOffset + p.data.byteLength)));

type Answer = Extract<HostToBlock, { kind: 'VALUE' | 'RAISE' }>;

/** One scripted invoke's end of the conversation. */
class InvokeIO {
  readonly answers: Answer[] = [];
  private waiter: ((a: Answer) => void) | undefined;

  constructor(
    readonly index: number,
    private readonly send: (m: BlockToHost) => void,
  ) {}

  deliver(a: Answer): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(a);
    } else this.answers.push(a);
  }

  private next(): Promise<Answer> {
    const a = this.answers.shift();
    return a ? Promise.resolve(a) : new Promise((resolve) => (this.waiter = resolve));
  }

  /** WAIT for `addr`; the host's answer. */
  async wait(addr: string): Promise<Answer> {
    this.send({ kind: 'WAIT', invoke: this.index, addr });
    const a = await this.next();
    assert.equal(a.addr, addr, `the answer is for the address waited for`);
    return a;
  }

  /** WAIT for `addr`, expecting VALUE: its tensors as numbers. */
  async value(addr: string): Promise<number[][]> {
    const a = await this.wait(addr);
    assert.equal(a.kind, 'VALUE', a.kind === 'RAISE' ? `${a.error.type}: ${a.error.message}` : '');
    return (a as Extract<Answer, { kind: 'VALUE' }>).values.map(numbers);
  }

  /** WAIT for `addr`, expecting RAISE: its error type and message. */
  async raised(addr: string): Promise<{ type: string; message: string }> {
    const a = await this.wait(addr);
    assert.equal(a.kind, 'RAISE', `expected a RAISE for ${addr}`);
    const e = (a as Extract<Answer, { kind: 'RAISE' }>).error;
    return { type: e.type, message: e.message };
  }

  swap(addr: string, values: TensorPayload[]): void {
    this.send({ kind: 'SWAP', invoke: this.index, addr, values });
  }

  skip(path: string, step: number, values: TensorPayload[]): void {
    this.send({ kind: 'SKIP', invoke: this.index, path, step, values });
  }

  cache(id: number, step: number, points: string[]): void {
    this.send({ kind: 'CACHE', invoke: this.index, id, step, points });
  }
}

type Script = (io: InvokeIO) => Promise<unknown>;

/**
 * Blocks played by scripts, one per invoke and trace: each gets START, runs, and ENDs with what it returned (an
 * EXCEPTION when it throws). `sent` is everything the host sent, in order.
 */
function scripted(traces: Script[][]): { open: () => BlockChannel; sent: HostToBlock[] } {
  const sent: HostToBlock[] = [];
  const open = () => {
    const { host, blocks } = channelPair();
    void (async () => {
      let trace = 0;
      let ios: InvokeIO[] = [];
      for (;;) {
        let msg: HostToBlock;
        try {
          msg = await blocks.receive();
        } catch {
          return;
        }
        sent.push(msg);
        if (msg.kind === 'START') {
          const scripts = traces[trace++]!;
          ios = msg.invokes.map((inv) => new InvokeIO(inv.invoke, (m) => blocks.send(m)));
          ios.forEach((io, i) => {
            scripts[i]!(io).then(
              (tree) => blocks.send({ kind: 'END', invoke: io.index, result: { tree: tree ?? null, tensors: [] } }),
              (e: Error) =>
                blocks.send({
                  kind: 'EXCEPTION',
                  invoke: io.index,
                  error: { type: 'BlockError', message: e.message, phase: 'execute' },
                }),
            );
          });
        } else if (msg.kind === 'VALUE' || msg.kind === 'RAISE') ios[msg.invoke]!.deliver(msg);
      }
    })();
    return host;
  };
  return { open, sent };
}

/** START for prompts (one row each) and `steps` passes. */
function start(prompts: number[][], steps = 1): StartRequest {
  return {
    kind: 'START',
    requestId: 'r1',
    invokes: prompts.map((tokens, i) => ({ invoke: i, source: 'async () => {}', tokens, batchStart: i, batchSize: 1 })),
    steps,
    cache: false,
  };
}

async function run(prompts: number[][], scripts: Script[]) {
  const blocks = scripted([scripts]);
  const result = await runRequest(
    fakeContext(),
    { invokes: [], timeoutMs: 10_000 } as never,
    start(prompts),
    blocks.open,
  );
  return { result, sent: blocks.sent };
}

const trees = (r: { invokes: Array<{ result: SavedTree }> }) => r.invokes.map((i) => i.result.tree);

test('VALUE: each invoke gets its own rows of a point; END carries what the block returned', async () => {
  const { result } = await run(
    [
      [1, 2],
      [5, 6],
    ],
    [async (io) => (await io.value('h.0.output.0'))[0], async (io) => (await io.value('head.output.0'))[0]],
  );
  // embed casts, each Add adds one: h.0.output = ids + 1, head.output = ids + 5.
  assert.deepEqual(trees(result), [
    [2, 3],
    [10, 11],
  ]);
  assert.equal(result.steps, 1);
  assert.equal(result.stoppedEarly, false);
});

test('invokes waiting at one point are served in invoke order, whatever order they asked in', async () => {
  const { sent } = await run(
    [[1], [2], [3]],
    [
      async (io) => {
        await new Promise((r) => setTimeout(r, 20));
        return io.value('h.1.output.0');
      },
      async (io) => io.value('h.1.output.0'),
      async (io) => io.value('h.1.output.0'),
    ],
  );
  const values = sent.filter((m) => m.kind === 'VALUE').map((m) => (m as { invoke: number }).invoke);
  assert.deepEqual(values, [0, 1, 2]);
});

test("SWAP replaces only the swapping invoke's rows, ahead of the pass or at the point it is at", async () => {
  const { result } = await run(
    [[1], [1], [1]],
    [
      // Ahead: swapped before the pass reaches h.0.output.
      async (io) => {
        io.swap('h.0.output.0', [f32([100])]);
        return (await io.value('head.output.0'))[0];
      },
      // At the point: read it, then swap it.
      async (io) => {
        const [h0] = await io.value('h.0.output.0');
        io.swap('h.0.output.0', [f32([h0![0]! * 10])]);
        return (await io.value('head.output.0'))[0];
      },
      async (io) => (await io.value('head.output.0'))[0],
    ],
  );
  assert.deepEqual(trees(result), [[104], [24], [6]]);
});

test('a swap whose shape or dtype is wrong fails the request with the invoke named', async () => {
  await assert.rejects(
    run(
      [[1, 2]],
      [
        async (io) => {
          io.swap('h.0.output.0', [f32([1])]);
          return io.value('head.output.0');
        },
      ],
    ),
    (e: unknown) => e instanceof InterventionError && e.blockError.type === 'ShapeMismatch' && e.invoke === 0,
  );
});

test('SKIP: a module every invoke skips is not run, its outputs are the values given; points inside it are NotProvided', async () => {
  const { result } = await run(
    [[1], [2]],
    [
      async (io) => {
        io.skip('h.1', 0, [f32([50])]);
        const inner = await io.raised('h.1.inner.output.0');
        return [inner.type, ...(await io.value('head.output.0'))[0]!];
      },
      async (io) => {
        io.skip('h.1', 0, [f32([60])]);
        return (await io.value('head.output.0'))[0];
      },
    ],
  );
  assert.deepEqual(trees(result), [['NotProvided', 51], [61]]);
});

test('SKIP by one invoke: the others run the module; a point inside it is NotProvided for the skipper only', async () => {
  const { result } = await run(
    [[1], [2]],
    [
      async (io) => {
        io.skip('h.1', 0, [f32([50])]);
        const inner = await io.raised('h.1.inner.output.0');
        assert.match(inner.message, /which this invoke skipped/);
        return (await io.value('head.output.0'))[0];
      },
      async (io) => [(await io.value('h.1.inner.output.0'))[0]![0], (await io.value('head.output.0'))[0]![0]],
    ],
  );
  assert.deepEqual(trees(result), [[51], [5, 7]]);
});

test('SKIP refusals: the model itself, a list of modules, an unknown module', async () => {
  for (const [path, type] of [
    ['', 'NotSkippable'],
    ['h', 'NotSkippable'],
    ['nope', 'UnknownModule'],
  ] as const) {
    await assert.rejects(
      run(
        [[1]],
        [
          async (io) => {
            io.skip(path, 0, [f32([1])]);
            return io.value('head.output.0');
          },
        ],
      ),
      (e: unknown) => e instanceof InterventionError && e.blockError.type === type,
      `skip of ${JSON.stringify(path)}`,
    );
  }
});

test('OutOfOrder: a point earlier than one already served is refused, and the block may go on', async () => {
  const { result } = await run(
    [[1]],
    [
      async (io) => {
        await io.value('h.1.output.0');
        const e = await io.raised('h.0.output.0');
        return [e.type, e.message.includes('forward order'), (await io.value('head.output.0'))[0]![0]];
      },
    ],
  );
  assert.deepEqual(trees(result), [['OutOfOrder', true, 6]]);
});

test('NotProvided: a point or step start at a step the request does not run; an unknown module and a list are other errors', async () => {
  const { result } = await run(
    [[1]],
    [
      async (io) => [
        (await io.raised('h.0.output.1')).type,
        (await io.raised(stepAddr(3))).type,
        (await io.raised('nope.output.0')).type,
        (await io.raised('h.output.0')).type,
        (await io.value(stepAddr(0))).length,
      ],
    ],
  );
  assert.deepEqual(trees(result), [['NotProvided', 'NotProvided', 'UnknownModule', 'NotObservable', 0]]);
});

test('EXCEPTION from a block fails the request with its invoke', async () => {
  await assert.rejects(
    run(
      [[1], [2]],
      [
        async (io) => io.value('head.output.0'),
        async () => {
          throw new Error('boom');
        },
      ],
    ),
    (e: unknown) => e instanceof InterventionError && e.invoke === 1 && e.blockError.message === 'boom',
  );
});

test('barriers: the parties are released together; a barrier that cannot fill raises BarrierError', async () => {
  const b = barrierAddr('sync', 0, 2);
  const { result, sent } = await run(
    [[1], [2]],
    [
      async (io) => {
        const v = await io.value('h.1.output.0');
        await io.value(b);
        return v[0];
      },
      async (io) => {
        await io.value(b);
        return (await io.value('head.output.0'))[0];
      },
    ],
  );
  assert.deepEqual(trees(result), [[5], [7]]);
  const released = sent.filter((m) => m.kind === 'VALUE' && m.addr === b).map((m) => (m as { invoke: number }).invoke);
  assert.deepEqual(released, [0, 1], 'both parties get VALUE, in invoke order');

  const lonely = await run(
    [[1], [2]],
    [async (io) => (await io.raised(barrierAddr('sync', 0, 2))).type, async () => 'done'],
  );
  assert.deepEqual(trees(lonely.result), ['BarrierError', 'done']);
  const mismatch = await run([[1]], [async (io) => (await io.raised(barrierAddr('sync', 0, 3))).message]);
  assert.match(String(trees(mismatch.result)[0]), /the trace has 1/);
});

test("caches: the points recorded come back in forward order with the invoke's rows, swaps applied", async () => {
  const { result } = await run(
    [[1], [2]],
    [
      async (io) => {
        io.cache(7, 0, ['h.1.output', 'h.0.output']);
        io.swap('h.0.output.0', [f32([10])]);
        return (await io.value(cacheAddr(7))).map((t) => t[0]);
      },
      async (io) => {
        io.cache(1, 0, ['head.output']);
        await io.value('h.1.output.0');
        return (await io.value(cacheAddr(1))).map((t) => t[0]);
      },
    ],
  );
  assert.deepEqual(trees(result), [[10, 13], [7]]);
});

test('caches: one started after the pass passed its first point is OutOfOrder; a cache never registered is refused', async () => {
  await assert.rejects(
    run(
      [[1]],
      [
        async (io) => {
          await io.value('h.1.output.0');
          io.cache(1, 0, ['h.0.output']);
          return io.value(cacheAddr(1));
        },
      ],
    ),
    (e: unknown) => e instanceof InterventionError && e.blockError.type === 'OutOfOrder',
  );
  const { result } = await run([[1]], [async (io) => (await io.raised(cacheAddr(9))).type]);
  assert.deepEqual(trees(result), ['ProtocolError']);
});

test('a session runs its traces one after the other on one channel, STOP completed between them', async () => {
  const blocks = scripted([
    [async (io) => (await io.value('h.0.output.0'))[0]],
    [async (io) => (await io.value('head.output.0'))[0]],
  ]);
  const traces: TraceRun[] = [
    { req: { invokes: [] } as never, start: start([[1]]), plan: null },
    { req: { invokes: [] } as never, start: start([[3]]), plan: null },
  ];
  const events: string[] = [];
  const results = await runTraces(fakeContext(), traces, blocks.open, {
    timeoutMs: 10_000,
    onTrace: (e) => events.push(`${e.trace}:${e.status}`),
  });
  assert.deepEqual(results.map(trees), [[[2]], [[8]]]);
  assert.deepEqual(events, ['0:RUNNING', '0:COMPLETED', '1:RUNNING', '1:COMPLETED']);
  const stops = blocks.sent.filter((m) => m.kind === 'STOP').map((m) => (m as { reason: string }).reason);
  assert.deepEqual(stops, ['completed', 'completed']);
  assert.deepEqual(
    blocks.sent.map((m) => m.kind),
    ['START', 'VALUE', 'STOP', 'START', 'VALUE', 'STOP'],
  );
});
