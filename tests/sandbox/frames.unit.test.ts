// Frame codec: round trips across any chunking, and a seeded fuzz over random, truncated and corrupted
// frames: the decoder raises only ProtocolError, and whatever it accepts re-encodes to exactly the bytes
// it read (so nothing is ever misread as a different message).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  ASSEMBLE_FRAME_BYTES,
  DEFAULT_MAX_FRAME_BYTES,
  FrameDecoder,
  ProtocolError,
  TAGS,
  decodeFrame,
  encodeAgentToRunner,
  encodeRunnerToAgent,
} from '../../protocol/frames.js';
import type { AgentToRunner, FrameDirection, RunnerToAgent } from '../../protocol/frames.js';
import type { BlockError, Dtype, TensorPayload } from '../../protocol/interleave.js';

const SEED = 20_251_202;
const DTYPE_BYTES: Record<Dtype, number> = { float32: 4, float16: 2, int64: 8, int32: 4, int8: 1, uint8: 1, bool: 1 };

const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const small = fc.integer({ min: 0, max: 1000 });
const text = fc.string({ unit: 'binary', maxLength: 40 });

const tensor: fc.Arbitrary<TensorPayload> = fc
  .record({
    dtype: fc.constantFrom<Dtype>('float32', 'float16', 'int64', 'int32', 'int8', 'uint8', 'bool'),
    shape: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 4 }),
  })
  .chain(({ dtype, shape }) => {
    const n = shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
    return fc.uint8Array({ minLength: n, maxLength: n }).map((data) => ({ dtype, shape, data }));
  });
const tensors = fc.array(tensor, { maxLength: 3 });

const blockError: fc.Arbitrary<BlockError> = fc
  .record({
    phase: fc.constantFrom<BlockError['phase']>('deserialize', 'execute', 'protocol'),
    type: text,
    message: text,
    stack: fc.option(text, { nil: undefined }),
  })
  .map((e) => {
    const out: BlockError = { phase: e.phase, type: e.type, message: e.message };
    if (e.stack !== undefined) out.stack = e.stack;
    return out;
  });

const agentToRunner: fc.Arbitrary<AgentToRunner> = fc.oneof(
  fc
    .record({
      kind: fc.constant('START' as const),
      requestId: text,
      invokes: fc.array(
        fc.record(
          {
            invoke: small,
            source: text,
            tokens: fc.array(fc.integer({ min: 0, max: 50_256 }), { maxLength: 8 }),
            batchStart: small,
            batchSize: small,
            // A model variant's edit, present or not.
            edit: fc.record({ key: text, source: text }),
          },
          { requiredKeys: ['invoke', 'source', 'tokens', 'batchStart', 'batchSize'] },
        ),
        { maxLength: 3 },
      ),
      steps: small,
      cache: fc.boolean(),
    })
    .chain((start) =>
      fc
        .option(
          fc
            .integer({ min: 1, max: 9 })
            .chain((count) => fc.record({ index: fc.integer({ min: 0, max: count - 1 }), count: fc.constant(count) }))
            .chain((t) =>
              // A loop's iteration of its count, or none.
              fc
                .option(
                  fc.integer({ min: 1, max: 1_000_000 }).chain((iterations) =>
                    fc.record({
                      iteration: fc.integer({ min: 0, max: iterations - 1 }),
                      iterations: fc.constant(iterations),
                    }),
                  ),
                  { nil: undefined },
                )
                .map((loop) => (loop === undefined ? t : { ...t, ...loop })),
            ),
          { nil: undefined },
        )
        .map((trace) => (trace === undefined ? start : { ...start, trace })),
    ),
  fc.record({
    kind: fc.constant('STEP' as const),
    step: u32,
    invokes: fc.array(fc.record({ invoke: u32, token: fc.integer({ min: -1, max: 50_256 }), finished: fc.boolean() }), {
      maxLength: 4,
    }),
  }),
  fc.record({ kind: fc.constant('VALUE' as const), invoke: u32, addr: text, values: tensors }),
  fc.record({ kind: fc.constant('RAISE' as const), invoke: u32, addr: text, error: blockError }),
  fc.record({ kind: fc.constant('STOP' as const), reason: text }),
  fc.record({
    kind: fc.constant('INIT' as const),
    version: u32,
    model: text,
    manifest: fc.jsonValue().map((v) => JSON.stringify(v)),
    tokenizer: fc.option(text, { nil: null }),
    tokenizerConfig: fc.option(text, { nil: null }),
    tokenizerFile: fc.option(text, { nil: null }),
  }),
);

const runnerToAgent: fc.Arbitrary<RunnerToAgent> = fc.oneof(
  fc.record({ kind: fc.constant('WAIT' as const), invoke: u32, addr: text }),
  fc.record({ kind: fc.constant('SWAP' as const), invoke: u32, addr: text, values: tensors }),
  fc.record({ kind: fc.constant('SKIP' as const), invoke: u32, path: text, step: u32, values: tensors }),
  fc.record({ kind: fc.constant('STOP' as const), invoke: u32 }),
  fc.record({
    kind: fc.constant('LOG' as const),
    invoke: u32,
    stream: fc.constantFrom('stdout' as const, 'stderr' as const),
    line: text,
  }),
  fc.record({
    kind: fc.constant('END' as const),
    invoke: u32,
    result: fc.record({
      // JSON.parse(JSON.stringify(x)) normalises -0 and the like, as the wire does.
      tree: fc.option(
        fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown),
        { nil: undefined },
      ),
      tensors,
    }),
  }),
  fc.record({ kind: fc.constant('EXCEPTION' as const), invoke: u32, error: blockError }),
  fc.record({ kind: fc.constant('REPORT' as const), invoke: u32, value: text }),
  fc.record({ kind: fc.constant('CALL' as const), invoke: u32, id: u32, path: text, values: tensors }),
  fc.record({
    kind: fc.constant('CACHE' as const),
    invoke: u32,
    id: u32,
    step: u32,
    points: fc.array(text, { maxLength: 4 }),
  }),
  fc.record({
    kind: fc.constant('BACKWARD' as const),
    invoke: u32,
    step: u32,
    seeds: fc.array(
      fc.oneof(
        fc.record({ addr: text, index: small, grad: tensor }),
        fc.record({ addr: text, index: small, shape: fc.array(small, { maxLength: 4 }), at: tensor, grad: tensor }),
      ),
      { maxLength: 3 },
    ),
  }),
  fc.record({
    kind: fc.constant('READY' as const),
    version: u32,
    pid: u32,
    startupMs: fc.double({ noNaN: true, noDefaultInfinity: true }),
    rssBytes: fc.double({ noNaN: true, noDefaultInfinity: true }),
  }),
  fc.record({ kind: fc.constant('FAILED' as const), code: text, message: text }),
);

function encode(direction: FrameDirection, msg: AgentToRunner | RunnerToAgent): Buffer {
  return direction === 'agent-to-runner'
    ? encodeAgentToRunner(msg as AgentToRunner)
    : encodeRunnerToAgent(msg as RunnerToAgent);
}

/** Splits `bytes` at the given fractions into chunks (some empty). */
function chunked(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => Math.floor(c * bytes.length)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(bytes.subarray(prev, p));
    prev = p;
  }
  out.push(bytes.subarray(prev));
  return out;
}

/** The decoder's verdict on a byte string: a ProtocolError or messages that re-encode to the same bytes. */
function assertNeverMisread(direction: FrameDirection, bytes: Uint8Array): 'accepted' | 'rejected' {
  let msgs: Array<AgentToRunner | RunnerToAgent>;
  const decoder = new FrameDecoder(direction);
  try {
    msgs = decoder.push(bytes);
    decoder.end();
  } catch (e) {
    assert.ok(e instanceof ProtocolError, `decoder threw a non-ProtocolError: ${String(e)}`);
    assert.match(e.code, /^FRAME_/);
    return 'rejected';
  }
  const again = Buffer.concat(msgs.map((m) => encode(direction, m)));
  assert.deepEqual(again, Buffer.from(bytes), 'accepted bytes must re-encode identically');
  return 'accepted';
}

for (const [direction, arb] of [
  ['agent-to-runner', agentToRunner],
  ['runner-to-agent', runnerToAgent],
] as const) {
  test(`${direction}: every message round-trips through any chunking`, () => {
    fc.assert(
      fc.property(
        fc.array(arb as fc.Arbitrary<AgentToRunner | RunnerToAgent>, { minLength: 1, maxLength: 4 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 6 }),
        (msgs, cuts) => {
          const stream = Buffer.concat(msgs.map((m) => encode(direction, m)));
          const decoder = new FrameDecoder(direction);
          const got = chunked(stream, cuts).flatMap((c) => decoder.push(c));
          decoder.end();
          assert.deepStrictEqual(got, structuredClone(msgs)); // fast-check records have a null prototype
        },
      ),
      { seed: SEED, numRuns: 1500 },
    );
  });

  test(`${direction}: corrupted frames raise ProtocolError or re-encode exactly`, () => {
    let rejected = 0;
    fc.assert(
      fc.property(
        arb as fc.Arbitrary<AgentToRunner | RunnerToAgent>,
        fc.array(
          fc.record({
            at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
            op: fc.constantFrom('flip', 'insert', 'delete', 'set'),
            byte: fc.integer({ min: 0, max: 255 }),
          }),
          { minLength: 1, maxLength: 4 },
        ),
        fc.boolean(),
        (msg, edits, fixLength) => {
          const bytes = [...encode(direction, msg)];
          for (const e of edits) {
            const i = Math.floor(e.at * bytes.length);
            if (e.op === 'flip') bytes[i] = bytes[i]! ^ (1 << (e.byte & 7));
            else if (e.op === 'set') bytes[i] = e.byte;
            else if (e.op === 'insert') bytes.splice(i, 0, e.byte);
            else if (bytes.length > 1) bytes.splice(i, 1);
          }
          const buf = Buffer.from(bytes);
          // Half the time keep the length field consistent with the edited size, so the body parser is exercised.
          if (fixLength && buf.length >= 4) buf.writeUInt32LE(buf.length - 4, 0);
          if (assertNeverMisread(direction, buf) === 'rejected') rejected++;
        },
      ),
      { seed: SEED, numRuns: 3000 },
    );
    assert.ok(rejected > 1000, `most corruptions are caught (${rejected} rejected)`);
  });

  test(`${direction}: random bodies behind a valid header raise ProtocolError or re-encode exactly`, () => {
    const tags = Object.values(TAGS[direction]);
    fc.assert(
      fc.property(
        fc.oneof(fc.constantFrom(...tags), fc.integer({ min: 0, max: 255 })),
        fc.uint8Array({ maxLength: 64 }),
        (tag, body) => {
          const buf = Buffer.alloc(5 + body.length);
          buf.writeUInt32LE(1 + body.length, 0);
          buf[4] = tag;
          buf.set(body, 5);
          assertNeverMisread(direction, buf);
        },
      ),
      { seed: SEED, numRuns: 3000 },
    );
  });

  test(`${direction}: a truncated frame is never a message`, () => {
    fc.assert(
      fc.property(
        arb as fc.Arbitrary<AgentToRunner | RunnerToAgent>,
        fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
        (msg, at) => {
          const frame = encode(direction, msg);
          const cut = frame.subarray(0, Math.floor(at * frame.length));
          const decoder = new FrameDecoder(direction);
          assert.deepEqual(decoder.push(cut), []);
          if (cut.length === 0) return decoder.end();
          assert.throws(
            () => decoder.end(),
            (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_TRUNCATED',
          );
          assert.throws(
            () => decodeFrame(direction, cut),
            (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_TRUNCATED',
          );
        },
      ),
      { seed: SEED, numRuns: 1500 },
    );
  });
}

test('an unknown tag raises FRAME_UNKNOWN_TAG, including a tag of the other direction', () => {
  const wait = encodeRunnerToAgent({ kind: 'WAIT', invoke: 0, addr: 'transformer.h.0.output.0' });
  assert.throws(
    () => new FrameDecoder('agent-to-runner').push(wait),
    (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_UNKNOWN_TAG',
  );
  const bogus = Buffer.from(wait);
  bogus[4] = 0x7f;
  assert.throws(
    () => decodeFrame('runner-to-agent', bogus),
    (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_UNKNOWN_TAG' && /0x7f/.test(e.message),
  );
});

test('an oversized length header raises FRAME_TOO_LARGE before the body arrives', () => {
  const header = Buffer.alloc(5);
  header.writeUInt32LE(DEFAULT_MAX_FRAME_BYTES + 1, 0);
  header[4] = TAGS['runner-to-agent'].LOG;
  assert.throws(
    () => new FrameDecoder('runner-to-agent').push(header),
    (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_TOO_LARGE',
  );
  const d = new FrameDecoder('runner-to-agent', { maxFrameBytes: 64 });
  assert.throws(
    () => d.push(encodeRunnerToAgent({ kind: 'LOG', invoke: 0, stream: 'stdout', line: 'x'.repeat(100) })),
    (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_TOO_LARGE',
  );
  assert.throws(
    () =>
      encodeRunnerToAgent({ kind: 'LOG', invoke: 0, stream: 'stdout', line: 'x'.repeat(100) }, { maxFrameBytes: 64 }),
    (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_TOO_LARGE',
  );
});

test('a zero-length frame and trailing bytes are malformed', () => {
  assert.throws(
    () => new FrameDecoder('runner-to-agent').push(Buffer.alloc(4)),
    (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_MALFORMED',
  );
  const stop = encodeRunnerToAgent({ kind: 'STOP', invoke: 3 });
  const longer = Buffer.concat([stop, Buffer.from([0])]);
  longer.writeUInt32LE(longer.length - 4, 0);
  assert.throws(
    () => decodeFrame('runner-to-agent', longer),
    (e: unknown) => e instanceof ProtocolError && /trailing/.test(e.message),
  );
});

test('after a ProtocolError the decoder stays failed', () => {
  const d = new FrameDecoder('runner-to-agent');
  const bad = Buffer.from([1, 0, 0, 0, 0x7f]);
  assert.throws(() => d.push(bad), ProtocolError);
  assert.throws(() => d.push(encodeRunnerToAgent({ kind: 'STOP', invoke: 0 })), ProtocolError);
});

test('the encoder refuses what it cannot write exactly', () => {
  const refuses = (f: () => unknown, re: RegExp) =>
    assert.throws(
      f,
      (e: unknown) => e instanceof ProtocolError && e.code === 'FRAME_UNENCODABLE' && re.test(e.message),
    );
  refuses(
    () =>
      encodeAgentToRunner({
        kind: 'START',
        requestId: 'r',
        trace: { index: 2, count: 2 },
        invokes: [],
        steps: 1,
        cache: false,
      }),
    /trace 2 of 2: the index must be below the count/,
  );
  refuses(
    () =>
      encodeAgentToRunner({
        kind: 'START',
        requestId: 'r',
        trace: { index: 0, count: 1, iteration: 5, iterations: 5 },
        invokes: [],
        steps: 1,
        cache: false,
      }),
    /iteration 5 of 5: the iteration must be below the count/,
  );
  refuses(
    () =>
      encodeRunnerToAgent({
        kind: 'SWAP',
        invoke: 0,
        addr: 'a.output.0',
        values: [{ dtype: 'float32', shape: [2, 2], data: new Uint8Array(15) }],
      }),
    /needs 16 bytes, data has 15/,
  );
  refuses(() => encodeRunnerToAgent({ kind: 'WAIT', invoke: 1.5, addr: 'a.output.0' }), /invoke must be an integer/);
  refuses(
    () =>
      encodeRunnerToAgent({
        kind: 'SWAP',
        invoke: 0,
        addr: 'a',
        values: [{ dtype: 'float64' as Dtype, shape: [1], data: new Uint8Array(8) }],
      }),
    /unknown dtype/,
  );
  refuses(
    () => encodeRunnerToAgent({ kind: 'END', invoke: 0, result: { tree: { n: 1n }, tensors: [] } }),
    /not JSON-serialisable/,
  );
  refuses(
    () =>
      encodeAgentToRunner({
        kind: 'START',
        requestId: 'r',
        steps: 1,
        cache: false,
        invokes: [{ invoke: 0, source: '', tokens: [-1], batchStart: 0, batchSize: 1 }],
      }),
    /token id/,
  );
  refuses(
    () => encodeRunnerToAgent({ kind: 'READY', version: 1, pid: 1, startupMs: Number.NaN, rssBytes: 0 }),
    /finite/,
  );
});

test('tensor bytes arrive 8-byte aligned, viewable as typed arrays without copying', () => {
  const values = [1.5, -2, 3.25];
  const f32 = new Uint8Array(new Float32Array(values).buffer);
  const i64 = new Uint8Array(new BigInt64Array([1n, -1n]).buffer);
  const frame = encodeAgentToRunner({
    kind: 'VALUE',
    invoke: 0,
    addr: 'x',
    values: [
      { dtype: 'float32', shape: [3], data: f32 },
      { dtype: 'int64', shape: [2], data: i64 },
    ],
  });
  const aligned = new Uint8Array(new ArrayBuffer(frame.length));
  aligned.set(frame);
  const [msg] = new FrameDecoder('agent-to-runner').push(aligned);
  assert.ok(msg && msg.kind === 'VALUE');
  const [a, b] = msg.values;
  assert.equal(a!.data.buffer, aligned.buffer, 'a view, not a copy');
  assert.deepEqual([...new Float32Array(a!.data.buffer, a!.data.byteOffset, 3)], values);
  assert.deepEqual([...new BigInt64Array(b!.data.buffer, b!.data.byteOffset, 2)], [1n, -1n]);
  // A misaligned buffer still decodes, through a copy.
  const odd = new Uint8Array(frame.length + 1);
  odd.set(frame, 1);
  const [msg2] = new FrameDecoder('agent-to-runner').push(odd.subarray(1));
  assert.ok(msg2 && msg2.kind === 'VALUE');
  assert.equal(msg2.values[0]!.data.byteOffset % 8, 0);
  assert.deepEqual([...new Float32Array(msg2.values[0]!.data.buffer, msg2.values[0]!.data.byteOffset, 3)], values);
});

test("START carries a request's uploaded tensors by name, bit for bit; none reads back as absent", () => {
  const data = new Uint8Array(new Float32Array([1.5, -0, Number.NaN, 3e-39]).buffer);
  const ids = new Uint8Array(new BigInt64Array([-1n, 2n ** 62n]).buffer);
  const start: AgentToRunner = {
    kind: 'START',
    requestId: 'r1',
    invokes: [{ invoke: 0, source: 'async () => 1', tokens: [1, 2], batchStart: 0, batchSize: 1 }],
    steps: 1,
    cache: false,
    inputs: [
      { name: 'probe_w', tensor: { dtype: 'float32', shape: [2, 2], data } },
      { name: 'ids', tensor: { dtype: 'int64', shape: [2], data: ids } },
    ],
  };
  const frame = encodeAgentToRunner(start);
  const back = decodeFrame('agent-to-runner', frame) as Extract<AgentToRunner, { kind: 'START' }>;
  assert.deepEqual(
    back.inputs?.map((t) => [t.name, t.tensor.dtype, t.tensor.shape, Buffer.from(t.tensor.data).toString('hex')]),
    [
      ['probe_w', 'float32', [2, 2], Buffer.from(data).toString('hex')],
      ['ids', 'int64', [2], Buffer.from(ids).toString('hex')],
    ],
  );
  const { inputs: _, ...without } = start;
  assert.equal((decodeFrame('agent-to-runner', encodeAgentToRunner(without)) as typeof back).inputs, undefined);
});

test('a large frame is assembled as its chunks arrive; a frame after it in the same chunk is read too; cut short it is FRAME_TRUNCATED', () => {
  const data = new Uint8Array(3 * 1024 * 1024 + 4);
  for (let i = 0; i < data.length; i += 997) data[i] = i % 251;
  const big: AgentToRunner = {
    kind: 'START',
    requestId: 'big',
    invokes: [{ invoke: 0, source: 'async () => 1', tokens: [1], batchStart: 0, batchSize: 1 }],
    steps: 1,
    cache: false,
    inputs: [{ name: 'w', tensor: { dtype: 'uint8', shape: [data.length], data } }],
  };
  const stop: AgentToRunner = { kind: 'STOP', reason: 'done' };
  const bytes = Buffer.concat([encodeAgentToRunner(big), encodeAgentToRunner(stop)]);
  const decoder = new FrameDecoder('agent-to-runner');
  const got: AgentToRunner[] = [];
  for (let i = 0; i < bytes.length; i += 65_536) got.push(...decoder.push(bytes.subarray(i, i + 65_536)));
  assert.equal(decoder.buffered, 0);
  assert.deepEqual(
    got.map((m) => m.kind),
    ['START', 'STOP'],
  );
  const back = got[0] as Extract<AgentToRunner, { kind: 'START' }>;
  assert.ok(Buffer.from(back.inputs![0]!.tensor.data).equals(Buffer.from(data)));

  const cut = new FrameDecoder('agent-to-runner');
  const frame = encodeAgentToRunner(big);
  cut.push(frame.subarray(0, 2_000_000));
  assert.equal(cut.buffered, 2_000_000);
  assert.throws(
    () => cut.end(),
    (e: unknown) =>
      e instanceof ProtocolError && e.code === 'FRAME_TRUNCATED' && e.message.includes(`of ${frame.length}`),
  );
});

test("a large frame's header alone commits no memory: its buffer is made once a MiB of it has arrived", () => {
  const decoder = new FrameDecoder('agent-to-runner');
  const header = Buffer.alloc(5);
  header.writeUInt32LE(512 * 1024 * 1024, 0);
  header[4] = TAGS['agent-to-runner'].START;
  assert.deepEqual(decoder.push(header), []);
  assert.equal(decoder.buffered, 5);
  assert.equal(decoder.reserved, 0, 'nothing made for a header alone');
  assert.deepEqual(decoder.push(new Uint8Array(ASSEMBLE_FRAME_BYTES - 6)), []);
  assert.equal(decoder.reserved, 0, 'nor for less than a MiB of it');
  assert.deepEqual(decoder.push(new Uint8Array(1)), []);
  assert.equal(decoder.buffered, ASSEMBLE_FRAME_BYTES);
  assert.equal(decoder.reserved, 4 + 512 * 1024 * 1024, 'a MiB of it: the frame is assembled in a buffer of its size');
});
