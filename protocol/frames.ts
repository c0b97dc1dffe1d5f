// Binary frames for the interleaving protocol across the sandbox's Unix socket, plus the sandbox's own
// control messages (INIT, READY, FAILED). A frame is [u32 LE length][u8 tag][body], where length counts
// the tag and the body. Tensor bytes travel raw (no JSON), 8-byte aligned from the start of the frame so a
// receiver can view them as typed arrays without copying. Every encoding is canonical: a byte string
// decodes to a message only if encoding that message gives back exactly those bytes, so a corrupted or
// misframed stream raises a ProtocolError instead of being misread. Each message's body is one table of fields in
// wire order (AGENT_TO_RUNNER, RUNNER_TO_AGENT) that the encoder and the decoder both follow, each field a writer
// and its reader side by side, so the two directions cannot drift apart. The byte level is frame-io.ts.
import {
  FRAME_HEADER_BYTES,
  FrameReader,
  FrameWriter,
  malformed,
  ProtocolError,
  U32_MAX,
  unencodable,
} from './frame-io.js';
import type { BlockError, BlockToHost, Dtype, GradSeed, HostToBlock, SavedTree, TensorPayload } from './interleave.js';

export { ProtocolError, type ProtocolErrorCode } from './frame-io.js';

/** Bumped whenever a frame layout changes; INIT and READY carry it so mismatched builds refuse each other. */
export const FRAME_VERSION = 6;
export { FRAME_HEADER_BYTES } from './frame-io.js';
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
    REPORT: 0x1b,
    READY: 0x22,
    FAILED: 0x23,
  },
} as const;

const DTYPES: readonly Dtype[] = ['float32', 'float16', 'int64', 'int32', 'int8', 'uint8', 'bool'];
const DTYPE_BYTES: Record<Dtype, number> = { float32: 4, float16: 2, int64: 8, int32: 4, int8: 1, uint8: 1, bool: 1 };
const PHASES: readonly BlockError['phase'][] = ['deserialize', 'execute', 'protocol'];
const STREAMS = ['stdout', 'stderr'] as const;
const MAX_RANK = 16;

export function bytesPerElement(dtype: Dtype): number {
  return DTYPE_BYTES[dtype];
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

// ---------------------------------------------------------------- the messages, field by field

/** How one value is written and read back: the two directions of a field, side by side. */
interface Field<T> {
  write(w: FrameWriter, v: T, what: string): void;
  read(r: FrameReader, what: string): T;
}

const u32: Field<number> = { write: (w, v, what) => w.u32(v, what), read: (r, what) => r.u32(what) };
const f64: Field<number> = { write: (w, v, what) => w.f64(v, what), read: (r, what) => r.f64(what) };
const str: Field<string> = { write: (w, v, what) => w.str(v, what), read: (r, what) => r.str(what) };
const flag: Field<boolean> = { write: (w, v) => w.u8(v ? 1 : 0), read: (r, what) => r.flag(what) };
/** A string or null: a presence flag, then the string. */
const nullableStr: Field<string | null> = {
  write: (w, v, what) => w.optStr(v, what),
  read: (r, what) => r.optStr(what) ?? null,
};
const tensors: Field<TensorPayload[]> = { write: writeTensors, read: readTensors };
const blockError: Field<BlockError> = { write: (w, e) => writeError(w, e), read: (r) => readError(r) };
const savedTree: Field<SavedTree> = { write: (w, t) => writeTree(w, t), read: (r) => readTree(r) };
const seeds: Field<GradSeed[]> = { write: (w, v) => writeSeeds(w, v), read: (r) => readSeeds(r) };

/** One of `values`, as its index in a byte. */
function oneOf<T extends string>(values: readonly T[]): Field<T> {
  return {
    write(w, v, what) {
      const i = values.indexOf(v);
      if (i < 0) unencodable(`${what} must be one of ${values.join(', ')}, got ${JSON.stringify(v)}`);
      w.u8(i);
    },
    read(r, what) {
      const code = r.u8(what);
      const v = values[code];
      if (v === undefined) throw malformed(`unknown ${what} code ${code}`);
      return v;
    },
  };
}

/** A u32 count, then the items; a count that cannot fit in what is left (items of at least `minBytes`) is refused. */
function listOf<T>(item: Field<T>, minBytes: number, itemWhat: (what: string, i: number) => string): Field<T[]> {
  return {
    write(w, v, what) {
      if (!Array.isArray(v)) unencodable(`${what}s must be an array`);
      w.u32(v.length, `${what} count`);
      v.forEach((x, i) => {
        item.write(w, x, itemWhat(what, i));
      });
    },
    read(r, what) {
      const n = r.count(`${what}s`, minBytes);
      const out: T[] = [];
      for (let i = 0; i < n; i++) out.push(item.read(r, itemWhat(what, i)));
      return out;
    },
  };
}

/** Fields in wire order: [key, field, what the field is called in errors]. */
type Fields<T> = ReadonlyArray<{ [K in keyof T]-?: readonly [K, Field<T[K]>, string] }[keyof T]>;

/** An object as its fields in order. A field read as undefined is left out of the object (an optional one). */
function recordOf<T>(fields: Fields<T>): Field<T> {
  // Indexed loops over parallel arrays: frames are on the interleaving's hot path.
  const keys = fields.map((f) => f[0]);
  const codecs = fields.map((f) => f[1] as Field<unknown>);
  const names = fields.map((f) => f[2]);
  const n = fields.length;
  return {
    write(w, v) {
      for (let i = 0; i < n; i++) codecs[i]!.write(w, v[keys[i]!], names[i]!);
    },
    read(r) {
      const out: Partial<T> = {};
      for (let i = 0; i < n; i++) {
        const value = codecs[i]!.read(r, names[i]!);
        if (value !== undefined) out[keys[i]!] = value as T[keyof T];
      }
      return out as T;
    },
  };
}

type Start = Extract<AgentToRunner, { kind: 'START' }>;
type Step = Extract<AgentToRunner, { kind: 'STEP' }>;

/**
 * A session's trace index and count, and the iteration of a repeated trace (0 of 0: not repeated); 0 of 0 for a
 * request of one trace (no `trace`).
 */
const traceOfSession: Field<Start['trace']> = {
  write(w, t) {
    if (t !== undefined && !(t.count >= 1 && t.index < t.count))
      unencodable(`trace ${String(t.index)} of ${String(t.count)}: the index must be below the count`);
    if (t?.iterations !== undefined && !(t.iterations >= 1 && (t.iteration ?? 0) < t.iterations))
      unencodable(`iteration ${String(t.iteration)} of ${String(t.iterations)}: the iteration must be below the count`);
    w.u32(t?.index ?? 0, 'trace index');
    w.u32(t?.count ?? 0, 'trace count');
    w.u32(t?.iterations === undefined ? 0 : (t.iteration ?? 0), 'trace iteration');
    w.u32(t?.iterations ?? 0, 'trace iterations');
  },
  read(r) {
    const index = r.u32('trace index');
    const count = r.u32('trace count');
    const iteration = r.u32('trace iteration');
    const iterations = r.u32('trace iterations');
    if (count === 0 ? index !== 0 || iterations !== 0 : index >= count)
      throw malformed(`START frame: trace ${index} of ${count}`);
    if (iterations === 0 ? iteration !== 0 : iteration >= iterations)
      throw malformed(`START frame: iteration ${iteration} of ${iterations}`);
    if (count === 0) return undefined;
    return iterations === 0 ? { index, count } : { index, count, iteration, iterations };
  },
};

/** A generated token, or -1 (none: the row had finished), which travels as 2^32 - 1. */
const tokenOrNone: Field<number> = {
  write: (w, v, what) => w.u32(v === -1 ? U32_MAX : v, what),
  read(r, what) {
    const raw = r.u32(what);
    return raw === U32_MAX ? -1 : raw;
  },
};

/** A model variant's edit, or none: a presence flag, then its key and source. */
const editOfVariant: Field<Start['invokes'][number]['edit']> = {
  write(w, e) {
    w.u8(e === undefined ? 0 : 1);
    if (e === undefined) return;
    w.str(e.key, 'edit key');
    w.str(e.source, 'edit source');
  },
  read(r) {
    if (!r.flag('edit')) return undefined;
    return { key: r.str('edit key'), source: r.str('edit source') };
  },
};

/** The uploaded tensors of a START: a count, then each name and its tensor; none is written as a count of 0. */
const namedTensors: Field<Start['inputs']> = {
  write(w, v) {
    const list = v ?? [];
    if (!Array.isArray(list)) unencodable('inputs must be an array of { name, tensor }');
    w.u32(list.length, 'input count');
    list.forEach((t, i) => {
      w.str(t.name, `input ${i} name`);
      writeTensors(w, [t.tensor], `input ${t.name}`);
    });
  },
  read(r) {
    const n = r.count('inputs', 9);
    if (n === 0) return undefined;
    const out: NonNullable<Start['inputs']> = [];
    for (let i = 0; i < n; i++) {
      const name = r.str(`input ${i} name`);
      const [tensor] = readTensors(r, `input ${name}`);
      if (tensor === undefined) throw malformed(`START frame: input ${name} has no tensor`);
      out.push({ name, tensor });
    }
    return out;
  },
};

const startInvoke = recordOf<Start['invokes'][number]>([
  ['invoke', u32, 'invoke'],
  ['source', str, 'block source'],
  ['tokens', listOf(u32, 4, () => 'token id'), 'token'],
  ['batchStart', u32, 'batchStart'],
  ['batchSize', u32, 'batchSize'],
  ['edit', editOfVariant, 'edit'],
]);

const stepInvoke = recordOf<Step['invokes'][number]>([
  ['invoke', u32, 'invoke'],
  ['token', tokenOrNone, 'token'],
  ['finished', flag, 'finished'],
]);

type Body<M, K> = Omit<Extract<M, { kind: K }>, 'kind'>;
type Table<M extends { kind: string }> = { [K in M['kind']]: Field<Body<M, K>> };

/** Each agent → runner message's body; encoding and decoding both follow it, so each is the other's inverse. */
const AGENT_TO_RUNNER: Table<AgentToRunner> = {
  START: recordOf<Body<AgentToRunner, 'START'>>([
    ['requestId', str, 'requestId'],
    ['steps', u32, 'steps'],
    ['cache', flag, 'cache'],
    ['trace', traceOfSession, 'trace'],
    ['invokes', listOf(startInvoke, 20, () => 'invoke'), 'invoke'],
    ['inputs', namedTensors, 'inputs'],
  ]),
  VALUE: recordOf<Body<AgentToRunner, 'VALUE'>>([
    ['invoke', u32, 'invoke'],
    ['addr', str, 'addr'],
    ['values', tensors, 'values'],
  ]),
  RAISE: recordOf<Body<AgentToRunner, 'RAISE'>>([
    ['invoke', u32, 'invoke'],
    ['addr', str, 'addr'],
    ['error', blockError, 'error'],
  ]),
  STOP: recordOf<Body<AgentToRunner, 'STOP'>>([['reason', str, 'reason']]),
  STEP: recordOf<Body<AgentToRunner, 'STEP'>>([
    ['step', u32, 'step'],
    ['invokes', listOf(stepInvoke, 9, () => 'invoke'), 'invoke'],
  ]),
  INIT: recordOf<Body<AgentToRunner, 'INIT'>>([
    ['version', u32, 'version'],
    ['model', str, 'model'],
    ['manifest', str, 'manifest'],
    ['tokenizer', nullableStr, 'tokenizer'],
    ['tokenizerConfig', nullableStr, 'tokenizerConfig'],
    ['tokenizerFile', nullableStr, 'tokenizerFile'],
  ]),
};

/** Each runner → agent message's body, likewise. */
const RUNNER_TO_AGENT: Table<RunnerToAgent> = {
  WAIT: recordOf<Body<RunnerToAgent, 'WAIT'>>([
    ['invoke', u32, 'invoke'],
    ['addr', str, 'addr'],
  ]),
  SWAP: recordOf<Body<RunnerToAgent, 'SWAP'>>([
    ['invoke', u32, 'invoke'],
    ['addr', str, 'addr'],
    ['values', tensors, 'values'],
  ]),
  SKIP: recordOf<Body<RunnerToAgent, 'SKIP'>>([
    ['invoke', u32, 'invoke'],
    ['path', str, 'path'],
    ['step', u32, 'step'],
    ['values', tensors, 'values'],
  ]),
  STOP: recordOf<Body<RunnerToAgent, 'STOP'>>([['invoke', u32, 'invoke']]),
  LOG: recordOf<Body<RunnerToAgent, 'LOG'>>([
    ['invoke', u32, 'invoke'],
    ['stream', oneOf(STREAMS), 'LOG stream'],
    ['line', str, 'line'],
  ]),
  END: recordOf<Body<RunnerToAgent, 'END'>>([
    ['invoke', u32, 'invoke'],
    ['result', savedTree, 'result'],
  ]),
  EXCEPTION: recordOf<Body<RunnerToAgent, 'EXCEPTION'>>([
    ['invoke', u32, 'invoke'],
    ['error', blockError, 'error'],
  ]),
  BACKWARD: recordOf<Body<RunnerToAgent, 'BACKWARD'>>([
    ['invoke', u32, 'invoke'],
    ['step', u32, 'step'],
    ['seeds', seeds, 'seeds'],
  ]),
  CALL: recordOf<Body<RunnerToAgent, 'CALL'>>([
    ['invoke', u32, 'invoke'],
    ['id', u32, 'call id'],
    ['path', str, 'path'],
    ['values', tensors, 'values'],
  ]),
  CACHE: recordOf<Body<RunnerToAgent, 'CACHE'>>([
    ['invoke', u32, 'invoke'],
    ['id', u32, 'cache id'],
    ['step', u32, 'step'],
    ['points', listOf(str, 4, (_, i) => `cache point ${i}`), 'point'],
  ]),
  REPORT: recordOf<Body<RunnerToAgent, 'REPORT'>>([
    ['invoke', u32, 'invoke'],
    ['value', str, 'value'],
  ]),
  READY: recordOf<Body<RunnerToAgent, 'READY'>>([
    ['version', u32, 'version'],
    ['pid', u32, 'pid'],
    ['startupMs', f64, 'startupMs'],
    ['rssBytes', f64, 'rssBytes'],
  ]),
  FAILED: recordOf<Body<RunnerToAgent, 'FAILED'>>([
    ['code', str, 'code'],
    ['message', str, 'message'],
  ]),
};

const TABLES = { 'agent-to-runner': AGENT_TO_RUNNER, 'runner-to-agent': RUNNER_TO_AGENT } as const;

function encode(direction: FrameDirection, msg: { kind: string }, opts: EncodeOptions): Buffer {
  const tags: Record<string, number> = TAGS[direction];
  const body = (TABLES[direction] as Record<string, Field<unknown>>)[msg?.kind];
  if (body === undefined || !Object.hasOwn(tags, msg.kind)) {
    const arrow = direction === 'agent-to-runner' ? 'agent → runner' : 'runner → agent';
    return unencodable(`no ${arrow} frame for message kind ${JSON.stringify((msg as { kind?: unknown })?.kind)}`);
  }
  const w = new FrameWriter();
  body.write(w, msg, msg.kind);
  return w.finish(tags[msg.kind]!, opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES);
}

/** Encodes one agent → runner message as a frame. Throws ProtocolError(FRAME_UNENCODABLE | FRAME_TOO_LARGE). */
export function encodeAgentToRunner(msg: AgentToRunner, opts: EncodeOptions = {}): Buffer {
  return encode('agent-to-runner', msg, opts);
}

/** Encodes one runner → agent message as a frame. Throws ProtocolError(FRAME_UNENCODABLE | FRAME_TOO_LARGE). */
export function encodeRunnerToAgent(msg: RunnerToAgent, opts: EncodeOptions = {}): Buffer {
  return encode('runner-to-agent', msg, opts);
}

function decodeBody(direction: FrameDirection, tag: number, r: FrameReader): AgentToRunner | RunnerToAgent {
  const kind = TAG_NAMES[direction].get(tag);
  if (kind === undefined) throw unknownTag(tag, direction);
  const body = (TABLES[direction] as Record<string, Field<object>>)[kind]!;
  return { kind, ...body.read(r, kind) } as AgentToRunner | RunnerToAgent;
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
  const msg = decodeBody(direction, tag, r);
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
/**
 * A frame at least this large is assembled in one buffer of its size as its bytes arrive (each chunk copied in and
 * let go), rather than held as chunks and copied out at the end: a 256 MiB START (a request's uploaded tensors)
 * then takes 256 MiB in a sandbox runner, not twice that. The buffer is made once this many bytes of the frame have
 * arrived, not on its header: a header alone (a peer's lie, or a corrupted length) commits no memory.
 */
export const ASSEMBLE_FRAME_BYTES = 1024 * 1024;

export class FrameDecoder<D extends FrameDirection> {
  private chunks: Uint8Array[] = [];
  private head = 0;
  private size = 0;
  /** A large frame being assembled: its buffer and the bytes filled so far. */
  private pending: { buf: Uint8Array; filled: number } | undefined;
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
    return this.size + (this.pending?.filled ?? 0);
  }

  /** Bytes of the buffer made for a large frame being assembled (ASSEMBLE_FRAME_BYTES); 0 when there is none. */
  get reserved(): number {
    return this.pending?.buf.length ?? 0;
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
  pushAll(received: Uint8Array): { messages: MessageOf<D>[]; error?: ProtocolError } {
    let chunk = received;
    if (this.failed) return { messages: [], error: this.failed };
    const out: MessageOf<D>[] = [];
    try {
      const p = this.pending;
      if (p !== undefined && chunk.length > 0) {
        const k = Math.min(chunk.length, p.buf.length - p.filled);
        p.buf.set(chunk.subarray(0, k), p.filled);
        p.filled += k;
        chunk = chunk.subarray(k);
        if (p.filled < p.buf.length) return { messages: out };
        this.pending = undefined;
        out.push(decodeFrame(this.direction, p.buf, { maxFrameBytes: this.maxFrameBytes }));
      }
      if (chunk.length > 0) {
        this.chunks.push(chunk);
        this.size += chunk.length;
      }
      for (;;) {
        if (this.size < 4) break;
        const length = this.peekLength();
        checkLength(length, this.maxFrameBytes);
        if (this.size < 4 + length) {
          if (4 + length >= ASSEMBLE_FRAME_BYTES && this.size >= ASSEMBLE_FRAME_BYTES) {
            const buf = new Uint8Array(4 + length);
            const have = this.size;
            buf.set(this.copyOut(have, true), 0);
            this.pending = { buf, filled: have };
          }
          break;
        }
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
    const p = this.pending;
    if (this.size > 0 || p !== undefined) {
      const buffered = this.buffered;
      const expected = p !== undefined ? p.buf.length : this.size >= 4 ? 4 + this.peekLength() : undefined;
      this.failed = new ProtocolError(
        'FRAME_TRUNCATED',
        `stream ended inside a frame: ${buffered} bytes buffered${expected === undefined ? '' : ` of ${expected}`}`,
        { buffered, ...(expected === undefined ? {} : { expected }) },
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
