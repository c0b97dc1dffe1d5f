// The trace of a batch of requests (serving/batch-run.ts): an interleaver whose invokes are several requests', which
// can split — the invokes of some requests continued by a trace of their own from where the pass is (`fork`, then
// `resume`), when the others' blocks keep them waiting. Single passes only (a batch never generates).
import type { BlockChannel } from '../../../protocol/interleave.js';
import type { InterventionError } from '../errors.js';
import { Interleaver } from './interleaver.js';
import { Mediator } from './mediator.js';

/** How a trace's passes went. */
export interface Outcome {
  steps: number;
  stoppedEarly: boolean;
}

/** How a batch's trace hands one request's failure or stall to the batch. */
export interface BatchHooks {
  /** Ends the invokes of the request `e` fails and returns true, or returns false (the whole trace fails). */
  isolate(e: InterventionError, mediators: Mediator[]): boolean;
  /** Called when the host has waited `stallMs` for the blocks of the invokes now running. */
  stalled(run: Interleaver): void;
  stallMs: number;
}

export class BatchTrace extends Interleaver {
  /** The invokes in `own` (ended here) continued by a trace of their own from where this one is, on `channel`. */
  fork(own: Set<number>, channel: BlockChannel): BatchTrace {
    const f = new BatchTrace(this.ctx, this.req, this.start, channel, this.deadline, null, this.trace, this.batch);
    f.step = this.step;
    f.rank = this.rank;
    f.endedWith = this.endedWith;
    f.finished = this.finished;
    f.headAt = this.headAt;
    const ended = (i: Mediator) => {
      const m = new Mediator(i.index, i.row, i.rows);
      m.end({ tree: null, tensors: [] });
      return m;
    };
    this.mediators.forEach((inv, i) => {
      f.mediators[i] = own.has(i) ? inv : ended(inv);
      if (own.has(i)) this.mediators[i] = ended(inv);
    });
    if (this.pass) f.pass = this.pass.fork!(f.timings, f.passHooks(false));
    return f;
  }

  /** Goes on from where the parent was when it forked: the waits at that point, the rest of the pass, the end. */
  async resume(): Promise<Outcome> {
    if (this.endedWith) return this.end(this.endedWith);
    if (!this.pass) return this.passes();
    if (this.rank < 0) await this.serveStepStart();
    else await this.serveWaiters(this.ctx.addresses.points[this.rank]!);
    const finished = await this.runStep();
    return this.end({ steps: 1, stoppedEarly: !finished });
  }
}
