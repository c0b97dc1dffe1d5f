// Serves one request on the blocks' end of a channel: waits for START, compiles and starts every invoke's block,
// routes VALUE/RAISE to the invoke they answer, and reports END or EXCEPTION for each. Returns when the host
// sends STOP or the channel breaks. The same code runs in the agent (trusted blocks) and in a sandbox runner.
// Each invoke's code runs in its own output context (invoke-output.ts): its console calls and its raw
// process.stdout/stderr writes become LOG lines of that invoke, flushed before its END or EXCEPTION.
// The same context carries the invoke's guard (invoke-guard.ts): a fault the block causes outside its own call
// stack (a throwing timer, a rejection nobody handles) ends that invoke with an EXCEPTION instead of the process.
// A block that returns while a read is still pending, or without awaiting one, ends with UnawaitedRead naming
// the read and its line.
import type { BlockEndpoint, BlockToHost, HostToBlock, StartRequest } from '../../protocol/interleave.js';
import type { Manifest } from '../../protocol/manifest.js';
import type { TextCodec } from '../../protocol/text-codec.js';
import { BlockCompileError, compileBlock, toBlockError } from './compile.js';
import { captureConsole } from './console-capture.js';
import { faultError, reportLateFault, unawaitedReadError } from './fault-errors.js';
import { installBlockFaultHandlers } from './fault-handlers.js';
import { InvokeGuard, installTimerGuards, realSetImmediate } from './invoke-guard.js';
import { InvokeOutput, runAsInvoke } from './invoke-output.js';
import { InvokeSession } from './invoke-session.js';
import { ManifestIndex } from './manifest-index.js';
import { createModelProxy } from './model-proxy.js';
import { toSavedTree } from './saved-tree.js';
import { Tensor } from './tensor.js';

export type { TextCodec } from '../../protocol/text-codec.js';

export interface BlockEnvironment {
  manifest: Manifest;
  /** The model's tokenizer, for ctx.encode / ctx.decode (null when the model has none). */
  tokenizer: TextCodec | null;
}

/** What a block receives as its second argument. */
export interface BlockContext {
  invoke: number;
  /** This invoke's prompt token ids. */
  tokens: number[];
  /** Forward passes in the request (generation steps). */
  steps: number;
  /** Rows of the batch this invoke owns, and the padded sequence length at step 0. */
  batchSize: number;
  sequence: number;
  Tensor: typeof Tensor;
  encode(text: string): number[];
  decode(ids: number[] | Tensor): string;
}

const EMPTY_BLOCK = 'async () => undefined';

function context(start: StartRequest, i: number, env: BlockEnvironment): BlockContext {
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
    Tensor,
    encode: (text) => (env.tokenizer ? env.tokenizer.encode(text) : noTokenizer()),
    decode: (ids) => {
      const list = ids instanceof Tensor ? Array.from({ length: ids.size }, (_, k) => ids.flat(k)) : ids;
      return env.tokenizer ? env.tokenizer.decode(list) : noTokenizer();
    },
  };
}

/** One macrotask: lets the rejections and exceptions of what the block just did surface first. */
const nextMacrotask = () => new Promise<void>((resolve) => realSetImmediate(resolve));

export async function serveBlocks(channel: BlockEndpoint, env: BlockEnvironment): Promise<void> {
  installTimerGuards();
  installBlockFaultHandlers();
  const index = new ManifestIndex(env.manifest);
  let first: HostToBlock;
  try {
    first = await channel.receive();
  } catch {
    return;
  }
  if (first.kind !== 'START') return;
  const start = first;
  const totalBatch = start.invokes.reduce((n, i) => n + i.batchSize, 0);
  const sequence = Math.max(...start.invokes.map((x) => x.tokens.length));
  let open = true;
  const send: BlockEndpoint['send'] = (msg) => {
    if (!open) return;
    try {
      channel.send(msg);
    } catch {
      open = false;
    }
  };
  const sessions = new Map<number, InvokeSession>();
  const guards: InvokeGuard[] = [];

  for (let i = 0; i < start.invokes.length; i++) {
    const inv = start.invokes[i]!;
    const session = new InvokeSession({ invoke: inv.invoke, batchSize: inv.batchSize, totalBatch, sequence, steps: start.steps }, index, send);
    sessions.set(inv.invoke, session);
    const log = (stream: 'stdout' | 'stderr', line: string) => send({ kind: 'LOG', invoke: inv.invoke, stream, line });
    const cons = captureConsole(log);
    const output = new InvokeOutput(inv.invoke, log);
    let ended = false;
    const end = (msg: Extract<BlockToHost, { kind: 'END' | 'EXCEPTION' }>) => {
      if (ended) return;
      ended = true;
      output.flush();
      send(msg);
    };
    const guard = new InvokeGuard(inv.invoke, (error, kind) => {
      const be = faultError(error, kind, inv.invoke);
      if (!ended) {
        end({ kind: 'EXCEPTION', invoke: inv.invoke, error: be });
        session.blockReturned();
        session.close('failed');
        guard.close();
      } else if (open) {
        log('stderr', `[ndif] ${be.type} after the block returned (ignored): ${be.message.split('\n')[0]}`);
      } else {
        reportLateFault(start.requestId, inv.invoke, be);
      }
    });
    output.guard = guard;
    guards.push(guard);
    let fn;
    try {
      fn = runAsInvoke(output, () => compileBlock(inv.source.trim() === '' ? EMPTY_BLOCK : inv.source, inv.invoke, cons));
    } catch (e) {
      end({ kind: 'EXCEPTION', invoke: inv.invoke, error: e instanceof BlockCompileError ? e.blockError : toBlockError(e, inv.invoke) });
      continue;
    }
    const m = createModelProxy(session, index);
    const ctx = context(start, i, env);
    void (async () => {
      try {
        const value = await runAsInvoke(output, () => fn(m, ctx));
        const left = session.blockReturned();
        await nextMacrotask();
        if (ended) return;
        if (left.length > 0) throw unawaitedReadError(left, inv.invoke);
        const result = runAsInvoke(output, () => toSavedTree(value));
        end({ kind: 'END', invoke: inv.invoke, result });
      } catch (e) {
        session.blockReturned();
        end({ kind: 'EXCEPTION', invoke: inv.invoke, error: toBlockError(e, inv.invoke) });
      }
    })();
  }

  const closeAll = (reason: string) => {
    for (const s of sessions.values()) s.close(reason);
    for (const g of guards) g.close();
  };
  for (;;) {
    let msg: HostToBlock;
    try {
      msg = await channel.receive();
    } catch {
      closeAll('closed');
      break;
    }
    if (msg.kind === 'STOP') {
      closeAll(msg.reason);
      break;
    }
    if (msg.kind === 'START') continue;
    const s = sessions.get(msg.invoke);
    if (!s) continue;
    try {
      if (msg.kind === 'VALUE') s.onValue(msg.addr, msg.values);
      else s.onRaise(msg.addr, msg.error);
    } catch (e) {
      send({ kind: 'EXCEPTION', invoke: msg.invoke, error: { phase: 'protocol', type: 'ProtocolError', message: (e as Error).message } });
    }
  }
  open = false;
}
