// Runs the traces of a session one after the other on one channel (a plain request is a session of one trace): one
// deadline for all, STOP `completed` after each trace but the last (the block side keeps `ctx.shared` and the
// traces' results and waits for the next START), and STOP with the outcome, then close, at the end. A repeated trace
// (a loop) runs its iterations the same way, each its own START … STOP; it reports RUNNING at most once per
// progress interval, with how many iterations are done and the latest value its blocks reported (ctx.report).
import type { BlockChannel, StartRequest } from '../../../protocol/interleave.js';
import { InterventionError } from '../errors.js';
import { Deadline } from './deadline.js';
import { passTimings } from './pass-timings.js';
import type { GenerationPlan, HostContext, TraceOptions, TraceRun } from './host-context.js';
import { Interleaver } from './interleaver.js';
import type { RunRequest, RunResult, TraceEvent } from './request-types.js';
import { DEFAULT_PREFIX_CACHE_BYTES, PrefixStore } from './prefix-reuse.js';

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
  const intervalMs = opts.progressIntervalMs ?? PROGRESS_INTERVAL_MS;
  let channel: BlockChannel | undefined;
  let stopReason = 'completed';
  const results: RunResult[] = [];
  // Traces after the first (or a loop's iterations) start from an earlier one's prefix where they share it.
  const prefixBytes = opts.prefixCacheBytes ?? DEFAULT_PREFIX_CACHE_BYTES;
  const severalPasses = traces.length > 1 || traces.some((t) => t.repeat !== undefined);
  const prefixes = severalPasses && prefixBytes > 0 ? new PrefixStore(prefixBytes) : undefined;
  try {
    channel = await Promise.race([Promise.resolve(open()), deadline.expired]);
    for (let t = 0; t < traces.length; t++) {
      const trace = traces[t]!;
      const iterations = trace.repeat?.times ?? 1;
      const loop = trace.repeat === undefined ? undefined : { iterations };
      const t0 = performance.now();
      let lastEvent = t0;
      let reported: TraceEvent['reported'];
      const event = (status: TraceEvent['status'], done: number, ms?: number) =>
        opts.onTrace?.({
          trace: t,
          traces: traces.length,
          status,
          ...(ms === undefined ? {} : { ms }),
          ...(loop === undefined ? {} : { iterations, done }),
          ...(reported === undefined ? {} : { reported }),
        });
      event('RUNNING', 0);
      let result: RunResult | undefined;
      for (let it = 0; it < iterations; it++) {
        const { req, start, plan } =
          trace.repeat === undefined ? trace : trace.repeat.runs[it % trace.repeat.runs.length]!;
        const begin = loop === undefined ? start : { ...start, trace: { ...start.trace!, iteration: it } };
        const i0 = performance.now();
        const stats0 = ctx.cache.getStats();
        const session = traces.length > 1 || loop !== undefined;
        const run = new Interleaver(ctx, req, begin, channel, deadline, plan, session ? t : undefined);
        run.prefixes = prefixes;
        let outcome: { steps: number; stoppedEarly: boolean };
        try {
          if (it > 0) deadline.check();
          outcome = await run.drive();
        } catch (e) {
          if (run.reported !== undefined) reported = { iteration: it, value: run.reported };
          event('ERROR', it, performance.now() - t0);
          if (session && e instanceof InterventionError)
            throw e.inTrace(t, loop === undefined ? undefined : { it, of: iterations });
          throw e;
        }
        const timings = passTimings(run, performance.now() - i0, stats0, ctx.cache.getStats());
        result = {
          requestId: start.requestId,
          ...(loop === undefined ? {} : { iterations: it + 1 }),
          invokes: run.results(),
          steps: outcome.steps,
          stoppedEarly: outcome.stoppedEarly,
          cache: plan === null ? 'none' : plan.cached ? ctx.kv.mode : 'none',
          logs: run.logs,
          timings: result === undefined ? timings : addTimings(result.timings, timings),
        };
        if (run.reported !== undefined) reported = { iteration: it, value: run.reported };
        if (t < traces.length - 1 || it < iterations - 1) channel.send({ kind: 'STOP', reason: 'completed' });
        const now = performance.now();
        if (loop !== undefined && it < iterations - 1 && now - lastEvent >= intervalMs) {
          lastEvent = now;
          event('RUNNING', it + 1, now - t0);
        }
      }
      results.push(result!);
      event('COMPLETED', iterations, performance.now() - t0);
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

/** Least time between two RUNNING events of a repeated trace: a loop of thousands of steps reports a few per second at most. */
export const PROGRESS_INTERVAL_MS = 1000;

function addTimings(a: RunResult['timings'], b: RunResult['timings']): RunResult['timings'] {
  const out = { ...a };
  for (const k of Object.keys(b) as (keyof RunResult['timings'])[]) out[k] = a[k] + b[k];
  return out;
}
