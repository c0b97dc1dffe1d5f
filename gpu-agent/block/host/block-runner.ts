// Serves one request on the blocks' end of a channel: waits for START, compiles and starts every invoke's block,
// routes VALUE/RAISE to the invoke they answer, and reports END or EXCEPTION for each. Returns when the host
// sends STOP or the channel breaks. The same code runs in the agent (trusted blocks) and in a sandbox runner.
// Each invoke's code runs in its own output context (invoke-output.ts): its console calls and its raw
// process.stdout/stderr writes become LOG lines of that invoke, flushed before its END or EXCEPTION.
// The same context carries the invoke's guard (invoke-guard.ts): a fault the block causes outside its own call
// stack (a throwing timer, a rejection nobody handles) ends that invoke with an EXCEPTION instead of the process.
// A block that returns while a read is still pending, or without awaiting one, ends with UnawaitedRead naming
// the read and its line. A session (several traces, each its own START … STOP on one channel) keeps `ctx.shared` and
// what each trace's blocks returned (`ctx.traces`) in this process from one trace to the next.
import type { BlockEndpoint, BlockToHost, HostToBlock, StartRequest } from '../../../protocol/interleave.js';
import type { Manifest } from '../../../protocol/manifest.js';
import type { TextCodec } from '../../../protocol/text-codec.js';
import type { LogQuota } from '../../../protocol/log-limits.js';
import { BlockCompileError, type BlockFunction, compileBlock, toBlockError } from './compile.js';
import { captureConsole } from '../containment/console-capture.js';
import { faultError, reportLateFault, unawaitedReadError } from '../containment/fault-errors.js';
import { installBlockFaultHandlers } from '../containment/fault-handlers.js';
import { InvokeGuard, installTimerGuards, realSetImmediate } from '../containment/invoke-guard.js';
import { InvokeOutput, runAsInvoke } from '../containment/invoke-output.js';
import { InvokeSession } from './invoke-session.js';
import { ManifestIndex } from '../api/manifest-index.js';
import { createModelProxy } from '../api/model-proxy.js';
import { toSavedTree } from '../api/saved-tree.js';
import { Tensor } from '../api/tensor.js';
import { optim } from '../api/optim.js';
import '../api/ops/index.js';
import type { BlockContext } from '../api/block-context.js';
import { reportProblem } from '../../../protocol/progress-report.js';

export type { BlockContext } from '../api/block-context.js';
import { GradSession } from './grad-session.js';
import { isGradAddr } from '../../../protocol/gradients.js';
import { cachePoints, cacheTree } from '../api/cache-tree.js';

export type { TextCodec } from '../../../protocol/text-codec.js';

export interface BlockEnvironment {
  manifest: Manifest;
  /** The model's tokenizer, for ctx.encode / ctx.decode (null when the model has none). */
  tokenizer: TextCodec | null;
  /** The request's log quota (protocol/log-limits.ts): lines past it are dropped here, before they cost memory. */
  logQuota?: LogQuota;
}

/** What a session's traces share on the block side (one request of one trace has one too). */
interface SessionState {
  shared: Record<string, unknown>;
  traces: unknown[][];
  /** The request's uploaded tensors, from its first START. */
  tensors: Readonly<Record<string, Tensor>> | undefined;
}

/** The session's uploaded tensors, taken from its first START. */
function sessionTensors(state: SessionState, start: StartRequest): Readonly<Record<string, Tensor>> {
  if (state.tensors === undefined) state.tensors = inputTensors(start);
  return state.tensors;
}

/** The uploaded tensors of a START as `ctx.tensors` (a frozen object without a prototype: names are plain keys). */
function inputTensors(start: StartRequest): Readonly<Record<string, Tensor>> {
  const out: Record<string, Tensor> = Object.create(null);
  for (const t of start.inputs ?? []) out[t.name] = Tensor.fromPayload(t.tensor);
  return Object.freeze(out);
}

const EMPTY_BLOCK = 'async () => undefined';

function context(
  start: StartRequest,
  i: number,
  env: BlockEnvironment,
  session: InvokeSession,
  grads: GradSession,
  index: ManifestIndex,
  state: SessionState,
): BlockContext {
  const inv = start.invokes[i]!;
  const noTokenizer = () => {
    throw new Error(`model ${env.manifest.model} has no tokenizer`);
  };
  return {
    invoke: inv.invoke,
    tokens: [...inv.tokens],
    steps: start.steps,
    batchSize: inv.batchSize,
    sequence: Math.max(...start.invokes.map((x) => x.tokens.length)),
    cached: start.cache,
    get generated() {
      return [...session.generated];
    },
    get finished() {
      return session.finished;
    },
    Tensor,
    tensors: sessionTensors(state, start),
    encode: (text) => (env.tokenizer ? env.tokenizer.encode(text) : noTokenizer()),
    decode: (ids) => {
      const list = ids instanceof Tensor ? Array.from({ length: ids.size }, (_, k) => ids.flat(k)) : ids;
      return env.tokenizer ? env.tokenizer.decode(list) : noTokenizer();
    },
    backward: (loss) => grads.backward(loss),
    optim,
    shared: state.shared,
    barrier: (name, parties) => session.barrier(name, parties ?? start.invokes.length),
    cache: (options) => {
      const { points, step } = cachePoints(index, options);
      return session.recordCache(points, step, (got) => cacheTree(index, got));
    },
    trace: start.trace?.index ?? 0,
    traceCount: start.trace?.count ?? 1,
    traces: state.traces,
    iteration: start.trace?.iteration ?? 0,
    iterations: start.trace?.iterations ?? 1,
    report: (value) => {
      const problem = reportProblem(value);
      if (problem !== undefined)
        throw new TypeError(
          `ctx.report: ${problem}; report a finite number (a loss) or { name: number, … } (≤ 8 keys)`,
        );
      session.report(JSON.stringify(value));
    },
  };
}

/** One macrotask: lets the rejections and exceptions of what the block just did surface first. */
const nextMacrotask = () => new Promise<void>((resolve) => realSetImmediate(resolve));

export async function serveBlocks(channel: BlockEndpoint, env: BlockEnvironment): Promise<void> {
  installTimerGuards();
  installBlockFaultHandlers();
  const index = ManifestIndex.of(env.manifest);
  const state: SessionState = { shared: {}, traces: [], tensors: undefined };
  let open = true;
  const send: BlockEndpoint['send'] = (msg) => {
    if (!open) return;
    try {
      channel.send(msg);
    } catch {
      open = false;
    }
  };
  for (;;) {
    let first: HostToBlock;
    try {
      first = await channel.receive();
    } catch {
      break;
    }
    if (first.kind !== 'START') break;
    if (!(await serveTrace(channel, env, index, first, state, send))) break;
  }
  open = false;
}

/** Serves one trace (START … STOP); true when the session goes on with another trace on this channel. */
async function serveTrace(
  channel: BlockEndpoint,
  env: BlockEnvironment,
  index: ManifestIndex,
  start: StartRequest,
  state: SessionState,
  send: BlockEndpoint['send'],
): Promise<boolean> {
  const totalBatch = start.invokes.reduce((n, i) => n + i.batchSize, 0);
  const sequence = Math.max(...start.invokes.map((x) => x.tokens.length));
  const sessions = new Map<number, InvokeSession>();
  const gradSessions = new Map<number, GradSession>();
  const guards: InvokeGuard[] = [];
  const returned: unknown[] = start.invokes.map(() => null);
  let canSend = true;
  const traceSend: BlockEndpoint['send'] = (msg) => {
    if (canSend) send(msg);
  };

  for (let i = 0; i < start.invokes.length; i++) {
    const inv = start.invokes[i]!;
    const session = new InvokeSession(
      {
        invoke: inv.invoke,
        batchSize: inv.batchSize,
        totalBatch,
        invokes: start.invokes.length,
        sequence,
        steps: start.steps,
        cached: start.cache,
      },
      index,
      traceSend,
    );
    sessions.set(inv.invoke, session);
    const grads = new GradSession(inv.invoke, index, traceSend, inv.source.includes('backward'));
    gradSessions.set(inv.invoke, grads);
    session.onSwap = (path, point, step, values) => grads.swapped(path, point, step, values);
    const log = (stream: 'stdout' | 'stderr', line: string) => {
      if (env.logQuota === undefined || env.logQuota.admit(line))
        traceSend({ kind: 'LOG', invoke: inv.invoke, stream, line });
    };
    const cons = captureConsole(log);
    const output = new InvokeOutput(inv.invoke, log);
    let ended = false;
    const end = (msg: Extract<BlockToHost, { kind: 'END' | 'EXCEPTION' }>) => {
      if (ended) return;
      ended = true;
      output.flush();
      traceSend(msg);
    };
    const guard = new InvokeGuard(inv.invoke, (error, kind) => {
      const be = faultError(error, kind, inv.invoke);
      if (!ended) {
        end({ kind: 'EXCEPTION', invoke: inv.invoke, error: be });
        session.blockReturned();
        grads.blockReturned();
        session.close('failed');
        grads.close('failed');
        guard.close();
      } else if (canSend) {
        log('stderr', `[ndif] ${be.type} after the block returned (ignored): ${be.message.split('\n')[0]}`);
      } else {
        reportLateFault(start.requestId, inv.invoke, be);
      }
    });
    output.guard = guard;
    guards.push(guard);
    let fn: BlockFunction;
    let editFn: BlockFunction | undefined;
    try {
      fn = runAsInvoke(output, () =>
        compileBlock(inv.source.trim() === '' ? EMPTY_BLOCK : inv.source, inv.invoke, cons),
      );
      if (inv.edit)
        editFn = runAsInvoke(output, () => compileBlock(inv.edit!.source, inv.invoke, cons, `edit-${inv.invoke}.js`));
    } catch (e) {
      end({
        kind: 'EXCEPTION',
        invoke: inv.invoke,
        error: e instanceof BlockCompileError ? e.blockError : toBlockError(e, inv.invoke),
      });
      continue;
    }
    const m = createModelProxy(session, index, 0, grads);
    const ctx = context(start, i, env, session, grads, index, state);
    void (async () => {
      try {
        const value = await runAsInvoke(output, () => withEdit(editFn, inv.edit?.key, fn, m, ctx));
        const left = [...session.blockReturned(), ...grads.blockReturned()];
        await nextMacrotask();
        if (ended) return;
        if (left.length > 0) throw unawaitedReadError(left, inv.invoke);
        const result = runAsInvoke(output, () => toSavedTree(value));
        returned[i] = value;
        end({ kind: 'END', invoke: inv.invoke, result });
      } catch (e) {
        session.blockReturned();
        grads.blockReturned();
        end({ kind: 'EXCEPTION', invoke: inv.invoke, error: toBlockError(e, inv.invoke) });
      }
    })();
  }

  const closeAll = (reason: string) => {
    for (const s of sessions.values()) s.close(reason);
    for (const g of gradSessions.values()) g.close(reason);
    for (const g of guards) g.close();
  };
  for (;;) {
    let msg: HostToBlock;
    try {
      msg = await channel.receive();
    } catch {
      closeAll('closed');
      canSend = false;
      return false;
    }
    if (msg.kind === 'STOP') {
      closeAll(msg.reason);
      canSend = false;
      const t = start.trace;
      const more =
        msg.reason === 'completed' &&
        t !== undefined &&
        (t.index < t.count - 1 || (t.iterations !== undefined && t.iteration! < t.iterations - 1));
      // A repeated trace keeps only its latest iteration's returns: a loop of thousands of steps holds one.
      if (more) state.traces[t.index] = returned;
      return more;
    }
    if (msg.kind === 'START') continue;
    if (msg.kind === 'STEP') {
      for (const e of msg.invokes) sessions.get(e.invoke)?.onStep(e.token, e.finished);
      continue;
    }
    const s = sessions.get(msg.invoke);
    const g = gradSessions.get(msg.invoke);
    if (!s || !g) continue;
    try {
      if (isGradAddr(msg.addr)) {
        if (msg.kind === 'VALUE') g.onValue(msg.addr, msg.values);
        else g.onRaise(msg.addr, msg.error);
      } else if (msg.kind === 'VALUE') {
        // Values of module points are the tape's leaves (a step's start, a call, a barrier bring none).
        for (const r of s.onValue(msg.addr, msg.values)) g.received(r.addr, r.step, r.tensors);
      } else s.onRaise(msg.addr, msg.error);
    } catch (e) {
      traceSend({
        kind: 'EXCEPTION',
        invoke: msg.invoke,
        error: { phase: 'protocol', type: 'ProtocolError', message: (e as Error).message },
      });
    }
  }
}

/**
 * The block with the model variant's edit: the edit is started first, on the same `m` and `ctx` (so its reads and swaps
 * are the invoke's own, in forward order with the block's), and the block's value is returned once both have ended. A
 * failure of the edit names it.
 */
async function withEdit(
  edit: BlockFunction | undefined,
  key: string | undefined,
  fn: BlockFunction,
  m: unknown,
  ctx: unknown,
): Promise<unknown> {
  if (!edit) return fn(m, ctx);
  const named = (e: unknown) => {
    try {
      if (e instanceof Error) e.message = `edit ${key}: ${e.message}`;
    } catch {
      // A frozen error (or one whose message cannot be set) goes as it is.
    }
    throw e;
  };
  let edited: Promise<unknown>;
  try {
    edited = Promise.resolve(edit(m, ctx)).catch(named);
  } catch (e) {
    return named(e);
  }
  // The block started after the edit; Promise.all holds both, so a failure of either is handled, never left unhandled.
  const [, value] = await Promise.all([edited, Promise.resolve().then(() => fn(m, ctx))]);
  return value;
}
