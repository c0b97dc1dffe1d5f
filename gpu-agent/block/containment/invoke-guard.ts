// Faults a block causes outside its own call stack — a timer callback that throws, a promise it rejects and nobody
// handles, a microtask that throws — are contained in the invoke that caused them instead of ending the process.
// Each invoke's code runs in an output context (invoke-output.ts); that context also carries the invoke's
// InvokeGuard, so whoever sees the fault (the wrapped timer callback, or the process's uncaughtException /
// unhandledRejection handler, which Node runs in the context of the failed callback or promise) can hand it to the
// right invoke. The guard also holds the timers the invoke started and clears them when its request ends, so a
// block's setInterval does not go on firing (and holding its tensors) in the agent after its request.
//
// The global setTimeout / setInterval / setImmediate / queueMicrotask are replaced once per process by wrappers
// that do this only when called from a block's context; everywhere else they are the originals.
import { currentInvokeOutput } from './invoke-output.js';

export type FaultKind = 'UnhandledRejection' | 'UncaughtException';
/** Hands a fault to its invoke; the guard decides what the request sees. */
export type FaultSink = (error: unknown, kind: FaultKind) => void;

type Handle = object;
type Clear = (h: Handle) => void;

/** Guards of invokes whose request is still being served in this process. */
const live = new Set<InvokeGuard>();

export class InvokeGuard {
  private readonly timers = new Map<Handle, Clear>();
  private closed = false;

  constructor(
    readonly invoke: number,
    private readonly sink: FaultSink,
  ) {
    live.add(this);
  }

  fault(error: unknown, kind: FaultKind): void {
    this.sink(error, kind);
  }

  track(h: Handle, clear: Clear): void {
    if (this.closed) clear(h);
    else this.timers.set(h, clear);
  }

  untrack(h: Handle): void {
    this.timers.delete(h);
  }

  /** The request is over: every timer the invoke left is cleared, and later ones are cleared at once. */
  close(): void {
    this.closed = true;
    live.delete(this);
    for (const [h, clear] of this.timers) clear(h);
    this.timers.clear();
  }

  get pendingTimers(): number {
    return this.timers.size;
  }
}

/** The guard of the invoke whose code is running now, if any. */
export function currentGuard(): InvokeGuard | undefined {
  return currentInvokeOutput()?.guard;
}

/** Hands `error` to the invoke whose context is current; false when no block's code is running. */
export function containBlockFault(error: unknown, kind: FaultKind): boolean {
  const g = currentGuard();
  if (!g) return false;
  g.fault(error, kind);
  return true;
}

/**
 * Hands `error` to the lowest invoke still being served (a sandbox runner, where every fault is its one request's,
 * even one raised outside every invoke's context); false when none is.
 */
export function containInLowestLive(error: unknown, kind: FaultKind): boolean {
  let lowest: InvokeGuard | undefined;
  for (const g of live) if (!lowest || g.invoke < lowest.invoke) lowest = g;
  if (!lowest) return false;
  lowest.fault(error, kind);
  return true;
}

const original = {
  setTimeout: globalThis.setTimeout,
  setInterval: globalThis.setInterval,
  setImmediate: globalThis.setImmediate,
  clearTimeout: globalThis.clearTimeout,
  clearInterval: globalThis.clearInterval,
  clearImmediate: globalThis.clearImmediate,
  queueMicrotask: globalThis.queueMicrotask,
};

/** The unwrapped setImmediate (what the runtime itself uses to wait a macrotask). */
export const realSetImmediate = original.setImmediate;

const owners = new WeakMap<Handle, InvokeGuard>();
let installed = false;

type AnyFn = (...args: unknown[]) => unknown;

function guarded(g: InvokeGuard, cb: AnyFn, after?: () => void): AnyFn {
  return function (this: unknown, ...args: unknown[]) {
    after?.();
    try {
      return cb.apply(this, args);
    } catch (e) {
      g.fault(e, 'UncaughtException');
      return undefined;
    }
  };
}

/** Replaces the global timer functions once per process (idempotent). */
export function installTimerGuards(): void {
  if (installed) return;
  installed = true;
  const g = globalThis as unknown as Record<string, unknown>;
  const clearOf =
    (name: 'clearTimeout' | 'clearInterval' | 'clearImmediate'): Clear =>
    (h) =>
      (original[name] as (h: unknown) => void)(h);
  const schedule = (name: 'setTimeout' | 'setInterval' | 'setImmediate', clear: Clear, once: boolean) =>
    function (this: unknown, cb: unknown, ...rest: unknown[]) {
      const guard = currentGuard();
      const real = original[name] as unknown as (...a: unknown[]) => Handle;
      if (!guard || typeof cb !== 'function') return real.call(globalThis, cb, ...rest);
      let handle: Handle | undefined;
      handle = real.call(
        globalThis,
        guarded(guard, cb as AnyFn, once ? () => handle && guard.untrack(handle) : undefined),
        ...rest,
      );
      owners.set(handle, guard);
      guard.track(handle, clear);
      return handle;
    };
  const unschedule = (name: 'clearTimeout' | 'clearInterval' | 'clearImmediate') =>
    function (this: unknown, h: unknown) {
      if (h !== null && typeof h === 'object') {
        owners.get(h)?.untrack(h);
        owners.delete(h);
      }
      return (original[name] as (h: unknown) => void)(h);
    };
  g.setTimeout = Object.assign(schedule('setTimeout', clearOf('clearTimeout'), true), original.setTimeout);
  g.setInterval = schedule('setInterval', clearOf('clearInterval'), false);
  g.setImmediate = Object.assign(schedule('setImmediate', clearOf('clearImmediate'), true), original.setImmediate);
  g.clearTimeout = unschedule('clearTimeout');
  g.clearInterval = unschedule('clearInterval');
  g.clearImmediate = unschedule('clearImmediate');
  g.queueMicrotask = (cb: unknown) => {
    const guard = currentGuard();
    if (!guard || typeof cb !== 'function') return original.queueMicrotask.call(globalThis, cb as () => void);
    return original.queueMicrotask.call(globalThis, guarded(guard, cb as AnyFn) as () => void);
  };
}
