// A block's raw writes to process.stdout / process.stderr. Each invoke's code runs inside an AsyncLocalStorage
// context that holds its InvokeOutput, so a write made from the block — directly, after an await, from a
// timer or promise it started — is known to be that invoke's and becomes its LOG lines. A write made outside
// every block's context goes to the process's own stream unchanged (the agent's own output), unless a
// handler for such writes is set (the sandbox runner, where all output is the block's).
//
// The two streams' `write` are replaced once per process, on first use, by a function that looks up the
// current context; what it replaces is called for every write that is not a block's.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { InvokeGuard } from './invoke-guard.js';
import { LineSplitter } from './line-splitter.js';

export type OutputStream = 'stdout' | 'stderr';
export type LineSink = (stream: OutputStream, line: string) => void;
export type TextSink = (stream: OutputStream, text: string) => void;

/** One invoke's raw output: text in, whole lines out (an unfinished line comes out on flush()). */
export class InvokeOutput {
  private readonly out: LineSplitter;
  private readonly err: LineSplitter;
  /** Where faults of this invoke's code go (invoke-guard.ts); set by the block runner. */
  guard: InvokeGuard | undefined;

  constructor(
    readonly invoke: number,
    sink: LineSink,
  ) {
    this.out = new LineSplitter((line) => sink('stdout', line));
    this.err = new LineSplitter((line) => sink('stderr', line));
  }

  write(stream: OutputStream, text: string): void {
    (stream === 'stdout' ? this.out : this.err).write(text);
  }

  /** Emits any unfinished line now (before the invoke's END, so its last words are not lost). */
  flush(): void {
    this.out.flush();
    this.err.flush();
  }
}

const current = new AsyncLocalStorage<InvokeOutput>();
let outside: TextSink | undefined;
let installed = false;

/** Runs `fn` as the invoke's code: raw writes from it and from everything it starts are the invoke's. */
export function runAsInvoke<T>(output: InvokeOutput, fn: () => T): T {
  captureStreamWrites();
  return current.run(output, fn);
}

/** The invoke whose code is running now, if any. */
export function currentInvokeOutput(): InvokeOutput | undefined {
  return current.getStore();
}

/** Where writes made outside every invoke's context go: `handler`, or (undefined) the real streams. */
export function routeWritesOutsideInvokes(handler: TextSink | undefined): void {
  captureStreamWrites();
  outside = handler;
}

type Write = typeof process.stdout.write;

function toText(chunk: unknown, encoding: unknown): string {
  const enc = typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8';
  const text =
    typeof chunk === 'string'
      ? enc === 'utf8' || enc === 'utf-8'
        ? chunk
        : Buffer.from(chunk, enc).toString('utf8')
      : ArrayBuffer.isView(chunk)
        ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8')
        : String(chunk);
  return (text as unknown as { toWellFormed(): string }).toWellFormed();
}

function captureStreamWrites(): void {
  if (installed) return;
  installed = true;
  for (const stream of ['stdout', 'stderr'] as const) {
    const target = process[stream];
    const original = target.write;
    target.write = function (this: unknown, ...args: unknown[]): boolean {
      const [chunk, encoding, cb] = args;
      const owner = current.getStore();
      const sink = owner
        ? (text: string) => owner.write(stream, text)
        : outside
          ? (text: string) => outside!(stream, text)
          : undefined;
      if (!sink) return (original as (...a: unknown[]) => boolean).apply(this, args);
      sink(toText(chunk, encoding));
      const callback = typeof encoding === 'function' ? encoding : cb;
      if (typeof callback === 'function') queueMicrotask(() => (callback as (e?: Error | null) => void)(null));
      return true;
    } as Write;
  }
}
