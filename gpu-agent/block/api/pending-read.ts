// The promise a block gets for a read (`m.x.output`, `.input`, …). It knows whether the block ever awaited it (or
// attached a handler: `.then`, `Promise.all`) and where the read was written, so a block that returns while a read
// is still pending, or that never awaited one, is told which line forgot its `await` — instead of the read's later
// rejection (when the request stops) going unhandled. Such a rejection is always handled here: a forgotten read
// never reaches the process's unhandledRejection handler.
import { InterleaveError } from './block-errors.js';

const noop = (): void => {};
const builtinThen = Promise.prototype.then;

export class PendingRead<T> extends Promise<T> {
  // Promises derived from a read (`.then(f)`, `await`'s own) are plain promises, not reads.
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  /** True once anything awaited the read or attached a handler to it. */
  awaited = false;
  settled = false;
  /** `<module path>.<point>.<step>` */
  addr = '';
  /** Captured where the read was made, for the line in the block's source. */
  origin: Error | undefined;
  /** The reads of the invoke not known to be fine yet (awaited and settled reads leave it). */
  tracker: Set<PendingRead<unknown>> | undefined;

  // biome-ignore lint/suspicious/noThenProperty: a Promise subclass: `await m.x.output` goes through this then
  override then<A = T, B = never>(
    onFulfilled?: ((v: T) => A | PromiseLike<A>) | null,
    onRejected?: ((e: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    this.awaited = true;
    if (this.settled) this.tracker?.delete(this as PendingRead<unknown>);
    return super.then(onFulfilled, onRejected);
  }
}

/** A read of `addr` that settles with `source` mapped by `map`, kept in `tracker` until it is awaited and settled. */
export function pendingRead<S, T>(
  addr: string,
  source: Promise<S>,
  map: (v: S) => T,
  tracker: Set<PendingRead<unknown>>,
): PendingRead<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const read = new PendingRead<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  read.addr = addr;
  // Where the block made the read: userStack keeps the frames of the block's own file when it is reported.
  read.origin = new Error(`read of ${addr}`);
  read.tracker = tracker;
  tracker.add(read as PendingRead<unknown>);
  builtinThen.call(read, undefined, noop);
  const settle = () => {
    read.settled = true;
    if (read.awaited) tracker.delete(read as PendingRead<unknown>);
  };
  builtinThen.call(
    source,
    (v: S) => {
      settle();
      try {
        resolve(map(v));
      } catch (e) {
        reject(e);
      }
    },
    (e: unknown) => {
      settle();
      reject(withOrigin(e, read.origin));
    },
  );
  return read;
}

/**
 * An answer's error (a RAISE: OutOfOrder, NotCallable, …) with the frames of where the block made the read, so the
 * failure names the user's line, as an error thrown at the call itself does. A copy: one answer can fail several reads.
 */
function withOrigin(e: unknown, origin: Error | undefined): unknown {
  if (!(e instanceof InterleaveError) || origin?.stack === undefined) return e;
  const copy = new InterleaveError(e.type, e.message);
  const frames = origin.stack.split('\n').filter((l) => /^\s+at /.test(l));
  copy.stack = `${copy.name}: ${copy.message}\n${frames.join('\n')}`;
  return copy;
}
