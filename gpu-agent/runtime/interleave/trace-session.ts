// Runs the traces of a session one after the other on one channel (a plain request is a session of one trace): one
// deadline for all, STOP `completed` after each trace but the last (the block side keeps `ctx.shared` and the
// traces' results and waits for the next START), and STOP with the outcome, then close, at the end.
import type { BlockChannel, StartRequest } from '../../../protocol/interleave.js';
import { InterventionError } from '../errors.js';
import { Deadline } from './deadline.js';
import type { GenerationPlan, HostContext, TraceOptions, TraceRun } from './host-context.js';
import { Interleaver } from './interleaver.js';
import type { RunRequest, RunResult } from './request-types.js';

type Open = () => BlockChannel | Promise<BlockChannel>;

/** Runs one request (a session of one trace). */
export async function runRequest(
  ctx: HostContext,
  req: RunRequest,
  start: StartRequest,
  open: Open,
  plan: GenerationPlan | null = null,
): Promise<RunResult> {
  const [r] = await runTraces(ctx, [{ req, start, plan }], open, { timeoutMs: req.timeoutMs, signal: req.signal });
  return r!;
}

export async function runTraces(
  ctx: HostContext,
  traces: TraceRun[],
  open: Open,
  opts: TraceOptions,
): Promise<RunResult[]> {
  const deadline = opts.deadline ?? new Deadline(opts.timeoutMs ?? 60_000, opts.signal);
  let channel: BlockChannel | undefined;
  let stopReason = 'completed';
  const results: RunResult[] = [];
  try {
    channel = await Promise.race([Promise.resolve(open()), deadline.expired]);
    for (let t = 0; t < traces.length; t++) {
      const { req, start, plan } = traces[t]!;
      const t0 = performance.now();
      const stats0 = ctx.cache.getStats();
      opts.onTrace?.({ trace: t, traces: traces.length, status: 'RUNNING' });
      const run = new Interleaver(ctx, req, start, channel, deadline, plan, traces.length > 1 ? t : undefined);
      let outcome: { steps: number; stoppedEarly: boolean };
      try {
        outcome = await run.drive();
      } catch (e) {
        opts.onTrace?.({ trace: t, traces: traces.length, status: 'ERROR', ms: performance.now() - t0 });
        if (traces.length > 1 && e instanceof InterventionError) throw e.inTrace(t);
        throw e;
      }
      const stats1 = ctx.cache.getStats();
      const totalMs = performance.now() - t0;
      results.push({
        requestId: start.requestId,
        invokes: run.results(),
        steps: outcome.steps,
        stoppedEarly: outcome.stoppedEarly,
        cache: plan === null ? 'none' : plan.cached ? ctx.kv.mode : 'none',
        logs: run.logs,
        timings: {
          totalMs,
          forwardMs: run.timings.forwardMs,
          compileMs: stats1.compileMs - stats0.compileMs,
          segmentRuns: run.timings.segmentRuns,
          segmentsCompiled: stats1.compiled - stats0.compiled,
          blockMs: run.blockMs,
          backwardMs: run.backward.backwardMs,
          backwardRuns: run.backward.backwardRuns,
          callMs: run.calls.callMs,
          calls: run.calls.calls,
        },
      });
      if (t < traces.length - 1) channel.send({ kind: 'STOP', reason: 'completed' });
      opts.onTrace?.({ trace: t, traces: traces.length, status: 'COMPLETED', ms: totalMs });
    }
    return results;
  } catch (e) {
    stopReason =
      deadline.reason?.type === 'Timeout' ? 'timeout' : deadline.reason?.type === 'Cancelled' ? 'cancelled' : 'failed';
    throw e;
  } finally {
    deadline.clear();
    if (channel) {
      try {
        channel.send({ kind: 'STOP', reason: stopReason });
      } catch {
        // The channel is already broken; nothing to tell the blocks.
      }
      channel.close();
    }
  }
}
