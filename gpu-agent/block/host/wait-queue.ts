// One invoke's waits for the host's answers — forward values (invoke-session.ts) and gradients
// (grad/grad-session.ts) alike: one WAIT in flight, the others queued and sent in the queue's order once the block
// has reacted to the last answer (next macrotask), a second wait for an address sharing the first, each answer
// (VALUE or RAISE) taken by the wait in flight, and every wait rejected when the request stops.
import { InterleaveError } from '../api/block-errors.js';
import { realSetImmediate } from '../containment/invoke-guard.js';
import type { Tensor } from '../api/tensor.js';

export interface Waiter {
  addr: string;
  step: number;
  rank: number;
  promise: Promise<Tensor[]>;
  resolve: (v: Tensor[]) => void;
  reject: (e: Error) => void;
  /** Reads sharing this wait (a read cancelled for its gradient withdraws it when it was the last). */
  refs: number;
  /**
   * Not tied to a point of the pass (a module call, a barrier): it goes out before the queued point waits and is never
   * stale. `send` sends its own message instead of a WAIT (CALL).
   */
  anytime?: { send?: () => void };
}

export class WaitQueue {
  private pending: Waiter[] = [];
  private inFlight: Waiter | undefined;
  private flushScheduled = false;

  constructor(
    private readonly sendWait: (addr: string) => void,
    /** Negative when `a` goes out before `b`. */
    private readonly order: (a: Waiter, b: Waiter) => number,
    /** Why a queued wait can no longer go out (what answers it has passed), if so. */
    private readonly stale: (w: Waiter) => Error | undefined,
    /** False once nothing more may go out (the block returned, the request stopped). */
    private readonly open: () => boolean,
  ) {}

  /** The wait for `addr`: the one already queued or in flight (shared), else a new one. */
  enqueue(addr: string, step: number, rank: number, anytime?: Waiter['anytime']): Waiter {
    const same = this.inFlight?.addr === addr ? this.inFlight : this.pending.find((w) => w.addr === addr);
    if (same) {
      same.refs++;
      return same;
    }
    let resolve!: (v: Tensor[]) => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<Tensor[]>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const w: Waiter = { addr, step, rank, promise, resolve, reject, refs: 1, ...(anytime ? { anytime } : {}) };
    this.pending.push(w);
    this.scheduleFlush();
    return w;
  }

  /** One read of `w` no longer needs it: when it was the last and the WAIT has not gone out, it never does. */
  withdraw(w: Waiter): void {
    if (--w.refs > 0) return;
    const i = this.pending.indexOf(w);
    if (i >= 0) this.pending.splice(i, 1);
  }

  /** The wait an answer for `addr` is for (the one in flight); the next wait goes out after it. */
  answered(addr: string, kind: 'VALUE' | 'RAISE'): Waiter {
    const w = this.inFlight;
    if (!w || w.addr !== addr)
      throw new InterleaveError('ProtocolError', `${kind} for ${addr} while waiting for ${w?.addr ?? 'nothing'}`);
    this.inFlight = undefined;
    this.scheduleFlush();
    return w;
  }

  /** Rejects the waits that have not gone out; returns the one in flight (still to be answered), if any. */
  rejectPending(e: Error): Waiter | undefined {
    const pending = this.pending;
    this.pending = [];
    for (const w of pending) w.reject(e);
    return this.inFlight;
  }

  rejectAll(e: Error): void {
    const all = [...this.pending, ...(this.inFlight ? [this.inFlight] : [])];
    this.pending = [];
    this.inFlight = undefined;
    for (const w of all) w.reject(e);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    realSetImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.inFlight || this.pending.length === 0 || !this.open()) return;
    this.pending.sort((a, b) => (a.anytime ? 0 : 1) - (b.anytime ? 0 : 1) || (a.anytime ? 0 : this.order(a, b)));
    const w = this.pending.shift()!;
    const stale = w.anytime ? undefined : this.stale(w);
    if (stale) {
      w.reject(stale);
      this.scheduleFlush();
      return;
    }
    this.inFlight = w;
    if (w.anytime?.send) w.anytime.send();
    else this.sendWait(w.addr);
  }
}
