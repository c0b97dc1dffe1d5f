// Binary frames for the interleaving protocol across the sandbox's Unix socket, plus the sandbox's own
// control messages (INIT, READY, FAILED). A frame is [u32 LE length][u8 tag][body], where length counts
// the tag and the body. Tensor bytes travel raw (no JSON), 8-byte aligned from the start of the frame so a
// receiver can view them as typed arrays without copying. Every encoding is canonical: a byte string
// decodes to a message only if encoding that message gives back exactly those bytes, so a corrupted or
// misframed stream raises a ProtocolError instead of being misread.
import { FabricError } from './errors.js';
import type { BlockError, BlockToHost, Dtype, GradSeed, HostToBlock, SavedTree, TensorPayload } from './interleave.js';

/** Bumped whenever a frame layout changes; INIT and READY carry it so mismatched builds refuse each other. */
export const FRAME_VERSION = 4;
/** Bytes before the body: u32 length + u8 tag. */
export const FRAME_HEADER_BYTES = 5;
/** Default cap on one frame (tag + body). GPT-2-small logits for 1024 tokens are ~206 MB. */
export const DEFAULT_MAX_FRAME_BYTES = 1 << 30;

/** Agent → runner, once, before READY: what the block side needs locally (no round trip to walk the tree or tokenize). */
export interface InitMessage {
  kind: 'INIT';
  version: number;
  model: string;
  /** The model's manifest (module tree, shapes) as JSON text. */
  manifest: string;
  /** tokenizer.json as text, or null when the model has none. */
  tokenizer: string | null;
  /** tokenizer_config.json as text, or null. */
  tokenizerConfig: string | null;
  /**
   * Instead of `tokenizer`: a tokenizer.json the runner may read, loaded on a block's first ctx.encode/decode
   * (1.3 MB for GPT-2: sending it to every runner would cost each one ~20 ms before READY).
   */
  tokenizerFile: string | null;
}

/** Runner → agent: INIT accepted, the runner waits for START. */
export interface ReadyMessage {
  kind: 'READY';
  version: number;
  pid: number;
  /** Milliseconds from the runner's process start to READY, as the runner measured it. */
  startupMs: number;
  rssBytes: number;
}

/** Runner → agent: the runner cannot serve (bad INIT, version mismatch); it exits after sending this. */
export interface FailedMessage {
  kind: 'FAILED';
  code: string;
  message: string;
}

export type AgentToRunner = HostToBlock | InitMessage;
export type RunnerToAgent = BlockToHost | ReadyMessage | FailedMessage;
export type FrameDirection = 'agent-to-runner' | 'runner-to-agent';

/** One tag per message kind and direction. STOP exists in both directions with different bodies. */
export const TAGS = {
  'agent-to-runner': { START: 0x01, VALUE: 0x02, RAISE: 0x03, STOP: 0x04, STEP: 0x05, INIT: 0x21 },
  'runner-to-agent': {
    WAIT: 0x11,
    SWAP: 0x12,
    SKIP: 0x13,
    STOP: 0x14,
    LOG: 0x15,
    END: 0x16,
    EXCEPTION: 0x17,
    BACKWARD: 0x18,
    CALL: 0x19,
    CACHE: 0x1a,
    READY: 0x22,
    FAILED: 0x23,
  },
} as const;

export type ProtocolErrorCode =
  | 'FRAME_UNKNOWN_TAG'
  | 'FRAME_TOO_LARGE'
  | 'FRAME_TRUNCATED'
  | 'FRAME_MALFORMED'
  | 'FRAME_UNENCODABLE';

/** A frame that cannot be read (or a message that cannot be written). The stream cannot be trusted after it. */
export class ProtocolError extends FabricError {
  constructor(code: ProtocolErrorCode, message: string, details?: Record<string, unknown>) {
    super(code, 500, message, details === undefined ? {} : { details });
    this.name = 'ProtocolError';
  }
}

const DTYPES: readonly Dtype[] = ['float32', 'float16', 'int64', 'int32', 'int8', 'uint8', 'bool'];
const DTYPE_BYTES: Record<Dtype, number> = { float32: 4, float16: 2, int64: 8, int32: 4, int8: 1, uint8: 1, bool: 1 };
const PHASES: readonly BlockError['phase'][] = ['deserialize', 'execute', 'protocol'];
const STREAMS = ['stdout', 'stderr'] as const;
const MAX_RANK = 16;
const U32_MAX = 0xffff_ffff;

export function bytesPerElement(dtype: Dtype): number {
  return DTYPE_BYTES[dtype];
}

// ---------------------------------------------------------------- writing

class FrameWriter {
  private readonly parts: Uint8Array[] = [];
  private scratch = Buffer.allocUnsafe(512);
  private pos = 0;
  /** Body bytes written so far (scratch included). */
  private total = 0;

  private room(n: number): void {
    if (this.pos + n <= this.scratch.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.scratch.length * 2, this.pos + n));
    this.scratch.copy(next, 0, 0, this.pos);
    this.scratch = next;
  }

  u8(v: number): void {
    this.room(1);
    this.scratch[this.pos++] = v;
    this.total += 1;
  }

  u32(v: number, what: string): void {
    if (!Number.isInteger(v) || v < 0 || v > U32_MAX)
      unencodable(`${what} must be an integer in [0, 2^32), got ${String(v)}`);
    this.room(4);
    this.scratch.writeUInt32LE(v, this.pos);
    this.pos += 4;
    this.total += 4;
  }

  f64(v: number, what: string): void {
    if (!Number.isFinite(v)) unencodable(`${what} must be a finite number, got ${String(v)}`);
    this.room(8);
    this.scratch.writeDoubleLE(v, this.pos);
    this.pos += 8;
    this.total += 8;
  }

  /** UTF-8 with a u32 byte length. Lone surrogates become U+FFFD (as every UTF-8 encoder does). */
  str(s: string, what: string): void {
    if (typeof s !== 'string') unencodable(`${what} must be a string, got ${typeof s}`);
    const n = Buffer.byteLength(s, 'utf8');
    this.u32(n, `${what} length`);
    this.room(n);
    this.scratch.write(s, this.pos, n, 'utf8');
    this.pos += n;
    this.total += n;
  }

  optStr(s: string | null | undefined, what: string): void {
    if (s === undefined || s === null) {
      this.u8(0);
      return;
    }
    this.u8(1);
    this.str(s, what);
  }

  /** Zero bytes up to the next multiple of 8 from the start of the frame. */
  align8(): void {
    const pad = (8 - ((FRAME_HEADER_BYTES + this.total) % 8)) % 8;
    this.room(pad);
    this.scratch.fill(0, this.pos, this.pos + pad);
    this.pos += pad;
    this.total += pad;
  }

  raw(bytes: Uint8Array): void {
    if (bytes.length <= 256) {
      this.room(bytes.length);
      this.scratch.set(bytes, this.pos);
      this.pos += bytes.length;
    } else {
      this.flushScratch();
      this.parts.push(bytes);
    }
    this.total += bytes.length;
  }

  private flushScratch(): void {
    if (this.pos === 0) return;
    this.parts.push(this.scratch.subarray(0, this.pos));
    this.scratch = Buffer.allocUnsafe(512);
    this.pos = 0;
  }

  finish(tag: number, maxFrameBytes: number): Buffer {
    this.flushScratch();
    const length = 1 + this.total;
    if (length > maxFrameBytes) {
      throw new ProtocolError(
        'FRAME_TOO_LARGE',
        `message needs a ${length}-byte frame, over the ${maxFrameBytes}-byte limit`,
        { length, maxFrameBytes },
      );
    }
    const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    header.writeUInt32LE(length, 0);
    header[4] = tag;
    return Buffer.concat([header, ...this.parts], FRAME_HEADER_BYTES + this.total);
  }
}

function unencodable(message: string): never {
  throw new ProtocolError('FRAME_UNENCODABLE', message);
}

function writeTensor(w: FrameWriter, t: TensorPayload, what: string): void {
  const code = DTYPES.indexOf(t?.dtype);
  if (code < 0)
    unencodable(`${what}: unknown dtype ${JSON.stringify(t?.dtype)} (expected one of ${DTYPES.join(', ')})`);
  if (!Array.isArray(t.shape) || t.shape.length > MAX_RANK)
    unencodable(`${what}: shape must be an array of at most ${MAX_RANK} dimensions`);
  if (!(t.data instanceof Uint8Array)) unencodable(`${what}: data must be a Uint8Array of raw little-endian bytes`);
  let elements = 1;
  w.u8(code + 1);
  w.u8(t.shape.length);
  for (const d of t.shape) {
    w.u32(d, `${what} dimension`);
    elements *= d;
  }
  const expected = elements * DTYPE_BYTES[t.dtype];
  if (t.data.length !== expected) {
    unencodable(`${what}: ${t.dtype}[${t.shape.join(',')}] needs ${expected} bytes, data has ${t.data.length}`);
  }
  w.align8();
  w.raw(t.data);
}

function writeTensors(w: FrameWriter, ts: TensorPayload[], what: string): void {
  if (!Array.isArray(ts)) unencodable(`${what} must be an array of tensors`);
  w.u32(ts.length, `${what} count`);
  ts.forEach((t, i) => {
    writeTensor(w, t, `${what}[${i}]`);
  });
}

function writeError(w: FrameWriter, e: BlockError): void {
  const phase = PHASES.indexOf(e?.phase);
  if (phase < 0) unencodable(`error phase must be one of ${PHASES.join(', ')}, got ${JSON.stringify(e?.phase)}`);
  w.u8(phase);
  w.str(e.type, 'error type');
  w.str(e.message, 'error message');
  w.optStr(e.stack, 'error stack');
}

function writeTree(w: FrameWriter, r: SavedTree): void {
  let json: string | undefined;
  try {
    json = JSON.stringify(r?.tree);
  } catch (e) {
    unencodable(`result tree is not JSON-serialisable: ${e instanceof Error ? e.message : String(e)}`);
  }
  w.optStr(json, 'result tree');
  writeTensors(w, r?.tensors, 'result tensors');
}

/** A seed: address, tensor index, then the dense gradient, or (flag 1) the dense shape, the offsets and the values. */
function writeSeeds(w: FrameWriter, seeds: GradSeed[]): void {
  if (!Array.isArray(seeds)) unencodable('seeds must be an array');
  w.u32(seeds.length, 'seed count');
  seeds.forEach((s, i) => {
    w.str(s.addr, `seed ${i} addr`);
    w.u32(s.index, `seed ${i} index`);
    const sparse = s.at !== undefined;
    w.u8(sparse ? 1 : 0);
    if (sparse) {
      if (!Array.isArray(s.shape) || s.shape.length > MAX_RANK)
        unencodable(`seed ${i}: a sparse seed needs its dense shape (at most ${MAX_RANK} dims)`);
      w.u8(s.shape.length);
      for (const d of s.shape) w.u32(d, `seed ${i} dimension`);
      writeTensor(w, s.at!, `seed ${i} offsets`);
    }
    writeTensor(w, s.grad, `seed ${i} gradient`);
  });
}

function readSeeds(r: FrameReader): GradSeed[] {
  const n = r.count('seeds', 13);
  const out: GradSeed[] = [];
  for (let i = 0; i < n; i++) {
    const addr = r.str(`seed ${i} addr`);
    const index = r.u32(`seed ${i} index`);
    if (r.flag(`seed ${i} sparse`)) {
      const rank = r.u8(`seed ${i} rank`);
      if (rank > MAX_RANK) throw malformed(`seed ${i}: rank ${rank} over ${MAX_RANK}`);
      const shape: number[] = [];
      for (let d = 0; d < rank; d++) shape.push(r.u32(`seed ${i} dimension`));
      const at = readTensor(r, `seed ${i} offsets`);
      out.push({ addr, index, shape, at, grad: readTensor(r, `seed ${i} gradient`) });
    } else out.push({ addr, index, grad: readTensor(r, `seed ${i} gradient`) });
  }
  return out;
}

export interface EncodeOptions {
  maxFrameBytes?: number;
}

/** Encodes one agent → runner message as a frame. Throws ProtocolError(FRAME_UNENCODABLE | FRAME_TOO_LARGE). */
export function encodeAgentToRunner(msg: AgentToRunner, opts: EncodeOptions = {}): Buffer {
  const w = new FrameWriter();
  const tags = TAGS['agent-to-runner'];
  let tag: number;
  switch (msg.kind) {
    case 'START':
      tag = tags.START;
      w.str(msg.requestId, 'requestId');
      w.u32(msg.steps, 'steps');
      w.u8(msg.cache ? 1 : 0);
      // A session's trace index and count; 0 of 0 for a request of one trace (no `trace`).
      if (msg.trace !== undefined && !(msg.trace.count >= 1 && msg.trace.index < msg.trace.count)) {
        unencodable(
          `trace ${String(msg.trace.index)} of ${String(msg.trace.count)}: the index must be below the count`,
        );
      }
      w.u32(msg.trace?.index ?? 0, 'trace index');
      w.u32(msg.trace?.count ?? 0, 'trace count');
      w.u32(msg.invokes.length, 'invoke count');
      for (const inv of msg.invokes) {
        w.u32(inv.invoke, 'invoke');
        w.str(inv.source, 'block source');
        w.u32(inv.tokens.length, 'token count');
        for (const t of inv.tokens) w.u32(t, 'token id');
        w.u32(inv.batchStart, 'batchStart');
        w.u32(inv.batchSize, 'batchSize');
      }
      break;
    case 'VALUE':
      tag = tags.VALUE;
      w.u32(msg.invoke, 'invoke');
      w.str(msg.addr, 'addr');
      writeTensors(w, msg.values, 'values');
      break;
    case 'RAISE':
      tag = tags.RAISE;
      w.u32(msg.invoke, 'invoke');
      w.str(msg.addr, 'addr');
      writeError(w, msg.error);
      break;
    case 'STOP':
      tag = tags.STOP;
      w.str(msg.reason, 'reason');
      break;
    case 'STEP':
      tag = tags.STEP;
      w.u32(msg.step, 'step');
      w.u32(msg.invokes.length, 'invoke count');
      for (const inv of msg.invokes) {
        w.u32(inv.invoke, 'invoke');
        // -1 (no token) travels as 2^32 - 1.
        w.u32(inv.token === -1 ? U32_MAX : inv.token, 'token');
        w.u8(inv.finished ? 1 : 0);
      }
      break;
    case 'INIT':
      tag = tags.INIT;
      w.u32(msg.version, 'version');
      w.str(msg.model, 'model');
      w.str(msg.manifest, 'manifest');
      w.optStr(msg.tokenizer, 'tokenizer');
      w.optStr(msg.tokenizerConfig, 'tokenizerConfig');
      w.optStr(msg.tokenizerFile, 'tokenizerFile');
      break;
    default:
      return unencodable(
        `no agent → runner frame for message kind ${JSON.stringify((msg as { kind?: unknown }).kind)}`,
      );
  }
  return w.finish(tag, opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES);
}

/** Encodes one runner → agent message as a frame. Throws ProtocolError(FRAME_UNENCODABLE | FRAME_TOO_LARGE). */
export function encodeRunnerToAgent(msg: RunnerToAgent, opts: EncodeOptions = {}): Buffer {
  const w = new FrameWriter();
  const tags = TAGS['runner-to-agent'];
  let tag: number;
  switch (msg.kind) {
    case 'WAIT':
      tag = tags.WAIT;
      w.u32(msg.invoke, 'invoke');
      w.str(msg.addr, 'addr');
      break;
    case 'SWAP':
      tag = tags.SWAP;
      w.u32(msg.invoke, 'invoke');
      w.str(msg.addr, 'addr');
      writeTensors(w, msg.values, 'values');
      break;
    case 'SKIP':
      tag = tags.SKIP;
      w.u32(msg.invoke, 'invoke');
      w.str(msg.path, 'path');
      w.u32(msg.step, 'step');
      writeTensors(w, msg.values, 'values');
      break;
    case 'STOP':
      tag = tags.STOP;
      w.u32(msg.invoke, 'invoke');
      break;
    case 'LOG': {
      tag = tags.LOG;
      const stream = STREAMS.indexOf(msg.stream);
      if (stream < 0) unencodable(`LOG stream must be stdout or stderr, got ${JSON.stringify(msg.stream)}`);
      w.u32(msg.invoke, 'invoke');
      w.u8(stream);
      w.str(msg.line, 'line');
      break;
    }
    case 'END':
      tag = tags.END;
      w.u32(msg.invoke, 'invoke');
      writeTree(w, msg.result);
      break;
    case 'EXCEPTION':
      tag = tags.EXCEPTION;
      w.u32(msg.invoke, 'invoke');
      writeError(w, msg.error);
      break;
    case 'BACKWARD':
      tag = tags.BACKWARD;
      w.u32(msg.invoke, 'invoke');
      w.u32(msg.step, 'step');
      writeSeeds(w, msg.seeds);
      break;
    case 'CALL':
      tag = tags.CALL;
      w.u32(msg.invoke, 'invoke');
      w.u32(msg.id, 'call id');
      w.str(msg.path, 'path');
      writeTensors(w, msg.values, 'values');
      break;
    case 'CACHE':
      tag = tags.CACHE;
      w.u32(msg.invoke, 'invoke');
      w.u32(msg.id, 'cache id');
      w.u32(msg.step, 'step');
      if (!Array.isArray(msg.points)) unencodable('cache points must be an array of point keys');
      w.u32(msg.points.length, 'point count');
      msg.points.forEach((k, i) => {
        w.str(k, `cache point ${i}`);
      });
      break;
    case 'READY':
      tag = tags.READY;
      w.u32(msg.version, 'version');
      w.u32(msg.pid, 'pid');
      w.f64(msg.startupMs, 'startupMs');
      w.f64(msg.rssBytes, 'rssBytes');
      break;
    case 'FAILED':
      tag = tags.FAILED;
      w.str(msg.code, 'code');
      w.str(msg.message, 'message');
      break;
    default:
      return unencodable(
        `no runner → agent frame for message kind ${JSON.stringify((msg as { kind?: unknown }).kind)}`,
      );
  }
  return w.finish(tag, opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES);
}

// ---------------------------------------------------------------- reading

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

class FrameReader {
  private pos = 0;
  private readonly view: DataView;

  /** `frame` is the whole frame, header included (offsets are relative to its start for alignment). */
  constructor(
    private readonly frame: Uint8Array,
    private readonly kind: string,
  ) {
    this.view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
    this.pos = FRAME_HEADER_BYTES;
  }

  private need(n: number, what: string): void {
    if (this.frame.length - this.pos < n) {
      throw malformed(`${this.kind} frame ends inside ${what}: needs ${n} bytes, ${this.frame.length - this.pos} left`);
    }
  }

  get remaining(): number {
    return this.frame.length - this.pos;
  }

  u8(what: string): number {
    this.need(1, what);
    return this.frame[this.pos++]!;
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }

  f64(what: string): number {
    this.need(8, what);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    if (!Number.isFinite(v)) throw malformed(`${this.kind} frame: ${what} is not a finite number`);
    return v;
  }

  flag(what: string): boolean {
    const f = this.u8(`${what} flag`);
    if (f > 1) throw malformed(`${this.kind} frame: ${what} flag is ${f}, expected 0 or 1`);
    return f === 1;
  }

  str(what: string): string {
    const n = this.u32(`${what} length`);
    this.need(n, what);
    const bytes = this.frame.subarray(this.pos, this.pos + n);
    this.pos += n;
    try {
      return utf8.decode(bytes);
    } catch {
      throw malformed(`${this.kind} frame: ${what} is not valid UTF-8`);
    }
  }

  optStr(what: string): string | undefined {
    return this.flag(what) ? this.str(what) : undefined;
  }

  align8(what: string): void {
    const pad = (8 - (this.pos % 8)) % 8;
    this.need(pad, `${what} padding`);
    for (let i = 0; i < pad; i++) {
      if (this.frame[this.pos + i] !== 0) throw malformed(`${this.kind} frame: non-zero padding before ${what}`);
    }
    this.pos += pad;
  }

  /** A view when the bytes are 8-byte aligned in memory, else an aligned copy. */
  bytes(n: number, what: string): Uint8Array {
    this.need(n, what);
    const view = this.frame.subarray(this.pos, this.pos + n);
    this.pos += n;
    return view.byteOffset % 8 === 0 ? new Uint8Array(view.buffer, view.byteOffset, n) : new Uint8Array(view);
  }

  /** A count of items each at least `minBytes` long, checked against what is left so no huge array is allocated. */
  count(what: string, minBytes: number): number {
    const n = this.u32(`${what} count`);
    if (n * minBytes > this.remaining)
      throw malformed(`${this.kind} frame: ${n} ${what} cannot fit in the ${this.remaining} bytes left`);
    return n;
  }

  done(): void {
    if (this.pos !== this.frame.length)
      throw malformed(`${this.kind} frame has ${this.frame.length - this.pos} trailing bytes`);
  }
}

function malformed(message: string): ProtocolError {
  return new ProtocolError('FRAME_MALFORMED', message);
}

function readTensor(r: FrameReader, what: string): TensorPayload {
  const code = r.u8(`${what} dtype`);
  const dtype = DTYPES[code - 1];
  if (dtype === undefined) throw malformed(`${what}: unknown dtype code ${code}`);
  const rank = r.u8(`${what} rank`);
  if (rank > MAX_RANK) throw malformed(`${what}: rank ${rank} over ${MAX_RANK}`);
  const shape: number[] = [];
  let elements = 1;
  for (let i = 0; i < rank; i++) {
    const d = r.u32(`${what} dimension`);
    shape.push(d);
    elements *= d;
  }
  r.align8(what);
  const n = elements * DTYPE_BYTES[dtype];
  if (n > r.remaining) throw malformed(`${what}: ${dtype}[${shape.join(',')}] needs ${n} bytes, ${r.remaining} left`);
  return { dtype, shape, data: r.bytes(n, what) };
}

function readTensors(r: FrameReader, what: string): TensorPayload[] {
  const n = r.count(what, 2);
  const out: TensorPayload[] = [];
  for (let i = 0; i < n; i++) out.push(readTensor(r, `${what}[${i}]`));
  return out;
}

function readError(r: FrameReader): BlockError {
  const code = r.u8('error phase');
  const phase = PHASES[code];
  if (phase === undefined) throw malformed(`unknown error phase code ${code}`);
  const type = r.str('error type');
  const message = r.str('error message');
  const stack = r.optStr('error stack');
  const e: BlockError = { phase, type, message };
  if (stack !== undefined) e.stack = stack;
  return e;
}

function readTree(r: FrameReader): SavedTree {
  const json = r.optStr('result tree');
  let tree: unknown;
  if (json !== undefined) {
    try {
      tree = JSON.parse(json);
    } catch {
      throw malformed('result tree is not valid JSON');
    }
    if (JSON.stringify(tree) !== json) throw malformed('result tree is not in canonical JSON form');
  }
  return { tree, tensors: readTensors(r, 'result tensors') };
}

function decodeAgentToRunner(tag: number, r: FrameReader): AgentToRunner {
  const t = TAGS['agent-to-runner'];
  switch (tag) {
    case t.START: {
      const requestId = r.str('requestId');
      const steps = r.u32('steps');
      const cache = r.flag('cache');
      const index = r.u32('trace index');
      const count = r.u32('trace count');
      if (count === 0 ? index !== 0 : index >= count) throw malformed(`START frame: trace ${index} of ${count}`);
      const n = r.count('invokes', 20);
      const invokes: Array<{
        invoke: number;
        source: string;
        tokens: number[];
        batchStart: number;
        batchSize: number;
      }> = [];
      for (let i = 0; i < n; i++) {
        const invoke = r.u32('invoke');
        const source = r.str('block source');
        const k = r.count('tokens', 4);
        const tokens: number[] = [];
        for (let j = 0; j < k; j++) tokens.push(r.u32('token id'));
        const batchStart = r.u32('batchStart');
        const batchSize = r.u32('batchSize');
        invokes.push({ invoke, source, tokens, batchStart, batchSize });
      }
      return { kind: 'START', requestId, ...(count === 0 ? {} : { trace: { index, count } }), invokes, steps, cache };
    }
    case t.VALUE: {
      const invoke = r.u32('invoke');
      const addr = r.str('addr');
      return { kind: 'VALUE', invoke, addr, values: readTensors(r, 'values') };
    }
    case t.RAISE: {
      const invoke = r.u32('invoke');
      const addr = r.str('addr');
      return { kind: 'RAISE', invoke, addr, error: readError(r) };
    }
    case t.STOP:
      return { kind: 'STOP', reason: r.str('reason') };
    case t.STEP: {
      const step = r.u32('step');
      const n = r.count('invokes', 9);
      const invokes: Array<{ invoke: number; token: number; finished: boolean }> = [];
      for (let i = 0; i < n; i++) {
        const invoke = r.u32('invoke');
        const raw = r.u32('token');
        const finished = r.flag('finished');
        invokes.push({ invoke, token: raw === U32_MAX ? -1 : raw, finished });
      }
      return { kind: 'STEP', step, invokes };
    }
    case t.INIT: {
      const version = r.u32('version');
      const model = r.str('model');
      const manifest = r.str('manifest');
      const tokenizer = r.optStr('tokenizer') ?? null;
      const tokenizerConfig = r.optStr('tokenizerConfig') ?? null;
      const tokenizerFile = r.optStr('tokenizerFile') ?? null;
      return { kind: 'INIT', version, model, manifest, tokenizer, tokenizerConfig, tokenizerFile };
    }
    default:
      throw unknownTag(tag, 'agent-to-runner');
  }
}

function decodeRunnerToAgent(tag: number, r: FrameReader): RunnerToAgent {
  const t = TAGS['runner-to-agent'];
  switch (tag) {
    case t.WAIT: {
      const invoke = r.u32('invoke');
      return { kind: 'WAIT', invoke, addr: r.str('addr') };
    }
    case t.SWAP: {
      const invoke = r.u32('invoke');
      const addr = r.str('addr');
      return { kind: 'SWAP', invoke, addr, values: readTensors(r, 'values') };
    }
    case t.SKIP: {
      const invoke = r.u32('invoke');
      const path = r.str('path');
      const step = r.u32('step');
      return { kind: 'SKIP', invoke, path, step, values: readTensors(r, 'values') };
    }
    case t.STOP:
      return { kind: 'STOP', invoke: r.u32('invoke') };
    case t.LOG: {
      const invoke = r.u32('invoke');
      const code = r.u8('stream');
      const stream = STREAMS[code];
      if (stream === undefined) throw malformed(`LOG frame: unknown stream code ${code}`);
      return { kind: 'LOG', invoke, stream, line: r.str('line') };
    }
    case t.END: {
      const invoke = r.u32('invoke');
      return { kind: 'END', invoke, result: readTree(r) };
    }
    case t.EXCEPTION: {
      const invoke = r.u32('invoke');
      return { kind: 'EXCEPTION', invoke, error: readError(r) };
    }
    case t.BACKWARD: {
      const invoke = r.u32('invoke');
      const step = r.u32('step');
      return { kind: 'BACKWARD', invoke, step, seeds: readSeeds(r) };
    }
    case t.CALL: {
      const invoke = r.u32('invoke');
      const id = r.u32('call id');
      const path = r.str('path');
      return { kind: 'CALL', invoke, id, path, values: readTensors(r, 'values') };
    }
    case t.CACHE: {
      const invoke = r.u32('invoke');
      const id = r.u32('cache id');
      const step = r.u32('step');
      const n = r.count('cache points', 4);
      const points: string[] = [];
      for (let i = 0; i < n; i++) points.push(r.str(`cache point ${i}`));
      return { kind: 'CACHE', invoke, id, step, points };
    }
    case t.READY: {
      const version = r.u32('version');
      const pid = r.u32('pid');
      const startupMs = r.f64('startupMs');
      const rssBytes = r.f64('rssBytes');
      return { kind: 'READY', version, pid, startupMs, rssBytes };
    }
    case t.FAILED: {
      const code = r.str('code');
      return { kind: 'FAILED', code, message: r.str('message') };
    }
    default:
      throw unknownTag(tag, 'runner-to-agent');
  }
}

function unknownTag(tag: number, direction: FrameDirection): ProtocolError {
  const known = Object.entries(TAGS[direction]).map(([k, v]) => `${k}=0x${v.toString(16).padStart(2, '0')}`);
  return new ProtocolError(
    'FRAME_UNKNOWN_TAG',
    `unknown ${direction} frame tag 0x${tag.toString(16).padStart(2, '0')} (known: ${known.join(', ')})`,
    { tag, direction },
  );
}

const TAG_NAMES: Record<FrameDirection, Map<number, string>> = {
  'agent-to-runner': new Map(Object.entries(TAGS['agent-to-runner']).map(([k, v]) => [v, k])),
  'runner-to-agent': new Map(Object.entries(TAGS['runner-to-agent']).map(([k, v]) => [v, k])),
};

type MessageOf<D extends FrameDirection> = D extends 'agent-to-runner' ? AgentToRunner : RunnerToAgent;

/** Decodes one complete frame (header included). Throws ProtocolError for anything but exactly one valid frame. */
export function decodeFrame<D extends FrameDirection>(
  direction: D,
  frame: Uint8Array,
  opts: EncodeOptions = {},
): MessageOf<D> {
  if (frame.length < FRAME_HEADER_BYTES)
    throw new ProtocolError(
      'FRAME_TRUNCATED',
      `frame of ${frame.length} bytes is shorter than its ${FRAME_HEADER_BYTES}-byte header`,
    );
  const length = new DataView(frame.buffer, frame.byteOffset, 4).getUint32(0, true);
  checkLength(length, opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES);
  if (frame.length !== 4 + length) {
    throw new ProtocolError(
      frame.length < 4 + length ? 'FRAME_TRUNCATED' : 'FRAME_MALFORMED',
      `frame header says ${4 + length} bytes, got ${frame.length}`,
    );
  }
  const tag = frame[4]!;
  const r = new FrameReader(frame, TAG_NAMES[direction].get(tag) ?? 'unknown');
  const msg = direction === 'agent-to-runner' ? decodeAgentToRunner(tag, r) : decodeRunnerToAgent(tag, r);
  r.done();
  return msg as MessageOf<D>;
}

function checkLength(length: number, maxFrameBytes: number): void {
  if (length === 0) throw malformed('frame length 0: a frame holds at least its tag byte');
  if (length > maxFrameBytes) {
    throw new ProtocolError('FRAME_TOO_LARGE', `frame of ${length} bytes is over the ${maxFrameBytes}-byte limit`, {
      length,
      maxFrameBytes,
    });
  }
}

/**
 * Splits a byte stream into messages, across any chunking. After the first ProtocolError the decoder is
 * poisoned: a stream cannot be resynchronised, so every later push rethrows it.
 */
export class FrameDecoder<D extends FrameDirection> {
  private chunks: Uint8Array[] = [];
  private head = 0;
  private size = 0;
  private failed: ProtocolError | undefined;
  private readonly maxFrameBytes: number;

  constructor(
    private readonly direction: D,
    opts: EncodeOptions = {},
  ) {
    this.maxFrameBytes = opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  }

  /** Bytes received but not yet part of a complete frame. */
  get buffered(): number {
    return this.size;
  }

  push(chunk: Uint8Array): MessageOf<D>[] {
    const r = this.pushAll(chunk);
    if (r.error !== undefined) throw r.error;
    return r.messages;
  }

  /**
   * Like push, but a chunk whose later bytes are unreadable still yields the complete frames before them (a
   * reader delivers those, then stops at the error): a runner's last LOG lines or EXCEPTION are not lost because
   * garbage followed them in the same read.
   */
  pushAll(chunk: Uint8Array): { messages: MessageOf<D>[]; error?: ProtocolError } {
    if (this.failed) return { messages: [], error: this.failed };
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.size += chunk.length;
    }
    const out: MessageOf<D>[] = [];
    try {
      for (;;) {
        if (this.size < 4) break;
        const length = this.peekLength();
        checkLength(length, this.maxFrameBytes);
        if (this.size < 4 + length) break;
        out.push(decodeFrame(this.direction, this.take(4 + length), { maxFrameBytes: this.maxFrameBytes }));
      }
    } catch (e) {
      this.failed =
        e instanceof ProtocolError
          ? e
          : malformed(`frame decoding failed: ${e instanceof Error ? e.message : String(e)}`);
      return { messages: out, error: this.failed };
    }
    return { messages: out };
  }

  /** The stream ended: anything still buffered is a truncated frame. */
  end(): void {
    if (this.failed) throw this.failed;
    if (this.size > 0) {
      const expected = this.size >= 4 ? 4 + this.peekLength() : undefined;
      this.failed = new ProtocolError(
        'FRAME_TRUNCATED',
        `stream ended inside a frame: ${this.size} bytes buffered${expected === undefined ? '' : ` of ${expected}`}`,
        { buffered: this.size, ...(expected === undefined ? {} : { expected }) },
      );
      throw this.failed;
    }
  }

  private peekLength(): number {
    const first = this.chunks[0]!;
    if (first.length - this.head >= 4)
      return new DataView(first.buffer, first.byteOffset + this.head, 4).getUint32(0, true);
    const b = this.copyOut(4, false);
    return new DataView(b.buffer, b.byteOffset, 4).getUint32(0, true);
  }

  private take(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length - this.head >= n) {
      const view = first.subarray(this.head, this.head + n);
      this.head += n;
      this.size -= n;
      if (this.head === first.length) {
        this.chunks.shift();
        this.head = 0;
      }
      return view;
    }
    return this.copyOut(n, true);
  }

  /** Copies the next n bytes into a fresh (8-byte aligned) buffer, consuming them when `consume`. */
  private copyOut(n: number, consume: boolean): Uint8Array {
    const out = new Uint8Array(n);
    let filled = 0;
    let i = 0;
    let head = this.head;
    while (filled < n) {
      const c = this.chunks[i]!;
      const k = Math.min(n - filled, c.length - head);
      out.set(c.subarray(head, head + k), filled);
      filled += k;
      head += k;
      if (head === c.length) {
        i++;
        head = 0;
      }
    }
    if (consume) {
      this.chunks.splice(0, i);
      this.head = head;
      this.size -= n;
    }
    return out;
  }
}
