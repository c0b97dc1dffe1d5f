// In the runner: a block's writes to process.stdout / process.stderr (console.* included, which writes
// through them) become LOG lines on the socket, in order with the block's other messages. Writes that
// bypass these streams (fs.writeSync(1, …)) still reach the runner's real stdout/stderr pipes, which the
// agent turns into LOG lines too.
import type { BlockToHost } from '../protocol/interleave.js';
import { LineSplitter } from './line-splitter.js';

type Write = typeof process.stdout.write;

export interface OutputCapture {
  /** Emits any unfinished line now (before an invoke's END, so its last words are not lost). */
  flush(): void;
  /** Emits any unfinished line and restores the real streams. */
  restore(): void;
}

/** `invoke` says which invoke a write belongs to (the one whose code is running, or the lowest open one). */
export function captureOutput(send: (msg: BlockToHost) => void, invoke: () => number): OutputCapture {
  const restores: Array<() => void> = [];
  const splitters: LineSplitter[] = [];
  for (const stream of ['stdout', 'stderr'] as const) {
    const target = process[stream];
    const original = target.write;
    const splitter = new LineSplitter((line) => send({ kind: 'LOG', invoke: invoke(), stream, line }));
    splitters.push(splitter);
    const write = function (this: unknown, chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
      const callback = typeof encoding === 'function' ? encoding : cb;
      const enc = typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8';
      const text =
        typeof chunk === 'string'
          ? enc === 'utf8' || enc === 'utf-8'
            ? chunk
            : Buffer.from(chunk, enc).toString('utf8')
          : Buffer.from(chunk as Uint8Array).toString('utf8');
      splitter.write((text as unknown as { toWellFormed(): string }).toWellFormed());
      if (typeof callback === 'function') queueMicrotask(() => (callback as (e?: Error) => void)());
      return true;
    } as Write;
    target.write = write;
    restores.push(() => {
      target.write = original;
    });
  }
  return {
    flush() {
      for (const s of splitters) s.flush();
    },
    restore() {
      for (const s of splitters) s.flush();
      for (const r of restores) r();
    },
  };
}
